"""The context experiment (Dai 2019; experiments/context): its measurements against explicit
computations, its checks on planted numbers (each of the three outcomes; design checks on the
compared cells only; the plateau cap), its settings."""

from __future__ import annotations

import math
import random

import pytest
import torch
import torch.nn.functional as F
from _refusals import refused

from attnkit.data.lm_text import generate_text, segments
from attnkit.data.vocab import Vocab
from attnkit.experiments.context import ContextConfig
from attnkit.experiments.context.checks import checks_of, reported_of
from attnkit.experiments.context.measure import (
    sliding_segment_bits,
    time_per_char,
    unigram_bits,
    xl_segment_bits,
)
from attnkit.experiments.evidence import t_interval, verdict_of
from attnkit.models import build_model
from attnkit.tasks.lm import text_nll


def tiny(name: str, vocab: Vocab, **kw):  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    return build_model(name, src_vocab=4, tgt_vocab=len(vocab), dim=16, heads=2, layers=1,
                       ff=16, dropout=0.0, **kw).double().eval()  # fmt: skip


TEXT = generate_text(150, seed=2)
VOCAB = Vocab.build([list(TEXT)])


def test_the_sliding_window_recomputes_each_characters_context():
    model = tiny("transformer-lm", VOCAB)
    ids = VOCAB.encode(list(TEXT), eos=False)
    context, segment = 12, 10
    bits = sliding_segment_bits(model, TEXT, VOCAB, context, segment)
    explicit = []  # character t from (at most) the 12 before it, one forward each
    with torch.no_grad():
        for t in range(1, len(ids)):
            window = torch.tensor([ids[max(0, t - context) : t]])
            logits = model(window).logits[0, -1]
            explicit.append(float(F.cross_entropy(logits[None], torch.tensor([ids[t]]))))
    per_segment = [sum(explicit[k : k + segment]) / len(explicit[k : k + segment]) / math.log(2)
                   for k in range(0, len(explicit), segment)]  # fmt: skip
    assert len(bits) == len(segments(TEXT, segment))
    assert bits == pytest.approx(per_segment, rel=1e-9)


def test_xl_segment_bits_sum_to_the_familys_nll():
    model = tiny("transformer-xl", VOCAB, memory=8)
    segs = segments(TEXT, 8)
    bits = xl_segment_bits(model, segs, VOCAB, streams=3, memory=16)
    nats, count = text_nll(model, segs, VOCAB, streams=3, memory=16)
    sizes = [len(s.tokens) - 1 for s in segs]
    assert sum(b * n for b, n in zip(bits, sizes, strict=True)) == pytest.approx(
        nats / math.log(2), rel=1e-9)  # fmt: skip
    assert count == sum(sizes)


def test_the_timing_returns_positive_seconds_per_character():
    xl, lm = tiny("transformer-xl", VOCAB), tiny("transformer-lm", VOCAB)
    ids = torch.tensor(VOCAB.encode(list(TEXT), eos=False))
    vanilla, mem = time_per_char(xl.float(), lm.float(), ids, 16, 8)
    assert vanilla > 0 and mem > 0


def test_unigram_bits_by_hand():
    # train "aab": counts a 2, b 1; total = 3 + 2 kinds + 1 = 6; test "xab" predicts a, b
    assert unigram_bits("aab", "xab") == pytest.approx((-math.log2(3 / 6) - math.log2(2 / 6)) / 2)


def planted(xl_gain: float, memory_gain: float, learned: bool = True, growth: float = 1.0,
            seeds: int = 5):  # fmt: skip
    """Numbers of 5 seeds x 40 segments: XL's bits at its training memory 32, at 64 and 128
    lower by half and all of ``memory_gain``, at 0 higher by 0.3; the vanilla LM higher by
    ``xl_gain``; speedups C^growth / 2; every run stopped after 5 of a cap of 30 epochs."""
    rng = random.Random(0)
    base = [[1.0 + 0.05 * rng.random() for _ in range(40)] for _ in range(seeds)]
    shift = lambda rows, d: [[x + d for x in r] for r in rows]  # noqa: E731
    timing = {str(c): [[c**growth * (1 + 0.01 * r) / 2e3, 1e-3] for r in range(3)]
              for c in (64, 128, 256, 512)}  # fmt: skip
    return {
        "xl": {"0": shift(base, 0.3), "32": base, "64": shift(base, -memory_gain / 2),
               "128": shift(base, -memory_gain)},
        "vanilla": shift(base, xl_gain),
        "unigram": [4.0 if learned else 1.1] * seeds,
        "train_memory": 32,
        "timing": timing,
        "stops": {"xl": [5] * seeds, "vanilla": [5] * seeds},
        "censored": {"xl": [False] * seeds, "vanilla": [False] * seeds},
        "cap": 30,
    }  # fmt: skip


def test_the_checks_give_each_outcome():
    assert verdict_of(checks_of(planted(0.2, 0.05))) == "REPRODUCED"
    no_gain = verdict_of(checks_of(planted(-0.2, 0.05)))
    assert no_gain.startswith("NOT REPRODUCED: (a) vanilla bpc - XL bpc"), no_gain
    flat = verdict_of(checks_of(planted(0.2, 0.05, growth=-0.2)))
    assert flat.startswith("NOT REPRODUCED") and "exponent" in flat, flat
    unlearned = verdict_of(checks_of(planted(0.2, 0.05, learned=False)))
    assert unlearned.startswith("INCONCLUSIVE: transformer-lm, sliding window learnt"), unlearned
    names = [c.name for c in checks_of(planted(0.2, -0.05))]
    assert "(c) XL bpc at memory 32 - at 128" in names
    assert verdict_of(checks_of(planted(0.2, -0.05))).startswith("NOT REPRODUCED: (c)")


def test_the_gaps_are_t_intervals_over_per_seed_means():
    n = planted(0.2, 0.05)
    n["vanilla"] = [[x + 0.01 * s for x in r] for s, r in enumerate(n["vanilla"])]
    (a,) = [c for c in checks_of(n) if c.name.startswith("(a)")]
    gaps = [0.2 + 0.01 * s for s in range(5)]
    assert a.value == pytest.approx(sum(gaps) / 5)
    assert a.ci[0] == pytest.approx(t_interval(gaps).lo)


def test_only_the_compared_cells_are_checked_each_on_its_own():
    """XL without memory (reported only) at the floor withholds nothing; XL at the longest
    evaluation memory (compared for (c)) at the floor makes the verdict INCONCLUSIVE though
    every other cell learnt."""
    n = planted(0.2, 0.05)
    n["xl"]["0"] = [[4.0] * 40 for _ in range(5)]  # the unigram bpc: the floor
    assert verdict_of(checks_of(n)) == "REPRODUCED"
    n["xl"]["128"] = [[4.0 + 0.01 * (-1) ** s] * 40 for s in range(5)]
    verdict = verdict_of(checks_of(n))
    assert verdict.startswith("INCONCLUSIVE: transformer-xl, memory 128 learnt"), verdict
    assert "memory 32 learnt" not in verdict and "sliding window learnt" not in verdict


def test_a_cap_within_three_median_stops_is_inconclusive():
    n = planted(0.2, 0.05)
    n["stops"]["vanilla"] = [12, 12, 15, 30, 30]
    n["censored"]["vanilla"] = [False, False, False, True, True]
    verdict = verdict_of(checks_of(n))
    assert verdict.startswith("INCONCLUSIVE: transformer-lm: cap / median stopping epoch: cap "
                              "30 / median stop 15 = 2, needs >= 3; 2 of 5 runs censored")


def test_the_other_longer_memories_are_reported_not_checked():
    shown = reported_of(planted(0.2, 0.05))
    assert [r["name"] for r in shown] == ["XL bpc at memory 32 - at 64"]
    assert shown[0]["value"] == pytest.approx(0.025) and shown[0]["n"] == 5


test_settings_are_checked_as_flags = refused(ContextConfig, [
    ({"batch_size": 0}, r"^--batch-size 0; it must be >= 1$"),
    ({"eval_memories": "0,16,32"}, "must hold the training --memory 64 and a longer"),
    ({"eval_memories": "0,32,64"}, "must hold the training --memory 64 and a longer"),
    ({"seeds": 1}, "--seeds 1: an interval"),
    ({"lengths": "64"}, "--lengths '64'"),
    ({"test_size": 1000}, "needs at least 1026 characters"),
])


def test_stop_of_counts_epochs_and_tells_a_plateau_from_a_cut_run(tmp_path):
    import json

    from attnkit.experiments.context import stop_of

    def run(name, losses):
        folder = tmp_path / name
        folder.mkdir()
        rows = [{"epoch": i + 1, "valid_loss": v} for i, v in enumerate(losses)]
        (folder / "history.json").write_text(json.dumps(rows))
        return folder

    assert stop_of(run("a", [2.0, 1.5, 1.4, 1.6, 1.45]), 2) == (5, False)  # best 3, then 2
    assert stop_of(run("b", [2.0, 1.5, 1.4, 1.6, 1.3]), 2) == (5, True)  # still falling


def test_c_needs_xl_to_use_its_own_training_memory():
    """(c)'s positive control: with an evaluation memory below the training one measured, XL
    must be better at its training memory than there, or (c) cannot tell (INCONCLUSIVE,
    never NOT REPRODUCED); a model that uses its memory leaves the verdict to the claims."""
    n = planted(0.2, -0.05)  # a longer memory is worse: (c) fails when it can tell
    n["xl"]["16"] = [[x + 0.1 for x in r] for r in n["xl"]["32"]]  # memory 16: worse by 0.1
    (control,) = [c for c in checks_of(n) if "uses its training memory" in c.name]
    assert control.kind == "design" and control.outcome == "pass"
    assert control.name == "(c) XL uses its training memory: bpc at memory 16 - at 32"
    assert verdict_of(checks_of(n)).startswith("NOT REPRODUCED: (c)")
    n["xl"]["16"] = [[x + 0.001 * (-1) ** i for x in r] for i, r in enumerate(n["xl"]["32"])]
    verdict = verdict_of(checks_of(n))
    assert verdict.startswith("INCONCLUSIVE: (c) XL uses its training memory"), verdict
