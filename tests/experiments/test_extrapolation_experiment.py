"""The extrapolation experiment (Press 2022; experiments/extrapolation): the evaluation at
k·L against a hand loop, its checks on planted numbers (each of the three outcomes), its
settings."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from _refusals import refused

from attnkit.data.lm_text import generate_text
from attnkit.data.vocab import Vocab
from attnkit.experiments.evidence import verdict_of
from attnkit.experiments.extrapolation import ExtrapolationConfig, bpc_table
from attnkit.experiments.extrapolation.checks import checks_of
from attnkit.models import build_model
from attnkit.tasks.lm import window_bits

TEXT = generate_text(200, seed=3)
VOCAB = Vocab.build([list(TEXT)])


def tiny(position: str):  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    return build_model("transformer-lm", src_vocab=4, tgt_vocab=len(VOCAB), dim=16, heads=2,
                       layers=2, ff=16, dropout=0.0, position=position
                       ).double().eval()  # fmt: skip


@pytest.mark.parametrize("position", ["alibi", "sinusoidal"])
@pytest.mark.parametrize("length", [4, 8, 16])
def test_window_bits_equals_a_hand_loop(position, length):
    """Block b predicts characters 16b + 1 .. 16b + 16, each window of ``length`` read on
    its own from scratch: one forward per window, by hand."""
    model = tiny(position)
    ids = VOCAB.encode(list(TEXT), eos=False)
    block = 16
    bits = window_bits(model, torch.tensor(ids), length, block, batch=length * 3)
    blocks = (len(ids) - 1) // block
    hand = []
    with torch.no_grad():
        for b in range(blocks):
            nats = []
            for s in range(b * block, (b + 1) * block, length):
                logits = model(torch.tensor([ids[s : s + length]])).logits[0]  # (length, V)
                target = torch.tensor(ids[s + 1 : s + length + 1])
                nats += F.cross_entropy(logits, target, reduction="none").tolist()
            hand.append(sum(nats) / len(nats) / math.log(2))
    assert len(bits) == blocks
    assert bits == pytest.approx(hand, rel=1e-10)


def test_window_bits_errors_say_what_to_do():
    ids = torch.tensor(VOCAB.encode(list(TEXT), eos=False))
    with pytest.raises(ValueError, match="multiple of the window length 3"):
        window_bits(tiny("alibi"), ids, 3, 16)
    with pytest.raises(ValueError, match="hold no block of 512"):
        window_bits(tiny("alibi"), ids, 8, 512)


def planted(alibi_rise: float, sin_rise: float, *, unigram: float = 4.0, spread: float = 0.05,
            seeds: int = 5, stop: int = 8):
    """``seeds`` seeds x 30 blocks at k = 1, 4; each arm at k = 4 shifted by its rise; the
    blocks' noise ``spread`` (a larger spread: a wider interval); every compared run stopped
    early at epoch ``stop`` of a cap of 30."""
    rng = random.Random(0)
    base = [[1.5 + spread * rng.gauss(0, 1) for _ in range(30)] for _ in range(seeds)]
    noisy = lambda d: [[x + d + spread * rng.gauss(0, 1) for x in r] for r in base]  # noqa: E731
    return {
        "bits": {"sinusoidal": {"1": base, "4": noisy(sin_rise)},
                 "learned": {"1": base, "4": None},
                 "alibi": {"1": base, "4": noisy(alibi_rise)}},
        "unigram": [unigram] * seeds,
        "stops": {"sinusoidal": [stop] * seeds, "alibi": [stop] * seeds},
        "censored": {"sinusoidal": [False] * seeds, "alibi": [False] * seeds},
        "cap": 30,
    }  # fmt: skip


def test_each_compared_arm_must_reach_its_plateau_and_only_the_compared_arms():
    """A cap under 3x an arm's median stop (here alibi's) withholds the verdict, naming the
    arm; the reported arms have no stopping check; a run stored without stopping points (a
    fixed number of epochs, before early stopping) cannot show a plateau."""
    n = planted(-0.1, 0.5)
    n["stops"]["alibi"] = [12, 30, 30, 14, 30]
    n["censored"]["alibi"] = [False, True, True, False, True]
    v = verdict_of(checks_of(n))
    assert v.startswith("INCONCLUSIVE: alibi: cap / median stopping epoch: cap 30 / median "
                        "stop 30") and "3 of 5 runs censored" in v, v  # fmt: skip
    names = [c.name for c in checks_of(planted(-0.1, 0.5))]
    assert [x for x in names if "stopping" in x] == ["sinusoidal: cap / median stopping epoch",
                                                   "alibi: cap / median stopping epoch"]
    old = planted(-0.1, 0.5)
    for key in ("stops", "censored", "cap"):
        del old[key]
    assert verdict_of(checks_of(old)).startswith("INCONCLUSIVE: compared runs trained to a "
                                                 "validation plateau")


def test_the_checks_give_each_outcome():
    assert verdict_of(checks_of(planted(-0.1, 0.5))) == "REPRODUCED"
    flat = verdict_of(checks_of(planted(0.0, 0.5)))  # no gain from the longer inputs
    assert flat.startswith("INCONCLUSIVE: ALiBi bpc at 4L - at L"), flat
    rises = verdict_of(checks_of(planted(0.3, 0.5)))
    assert rises.startswith("NOT REPRODUCED: ALiBi bpc at 4L - at L"), rises
    no_rise = verdict_of(checks_of(planted(-0.1, -0.2)))
    assert no_rise.startswith("NOT REPRODUCED: sinusoidal bpc at 4L - at L"), no_rise
    straddle = verdict_of(checks_of(planted(0.0, 0.5, spread=0.3)))
    assert straddle.startswith("INCONCLUSIVE: ALiBi bpc at 4L - at L"), straddle
    assert "holds both" in straddle
    unlearned = verdict_of(checks_of(planted(-0.1, 0.5, unigram=1.6)))
    assert unlearned.startswith("INCONCLUSIVE: worse of sinusoidal, ALiBi bpc at L"), unlearned
    few = verdict_of(checks_of(planted(-0.1, 0.5, seeds=3)))
    assert few.startswith("INCONCLUSIVE: seeds for a check (at least 5): 3"), few


def test_only_the_compared_arms_decide():
    """A reported arm (learned positions) at the floor of learning, chance-level bits at L,
    does not withhold the verdict; a compared arm (ALiBi) that learned nothing does."""
    n = planted(-0.1, 0.5)
    n["bits"]["learned"]["1"] = [[4.0] * 30 for _ in range(5)]  # as bad as the unigram
    assert verdict_of(checks_of(n)) == "REPRODUCED"
    n["bits"]["alibi"]["1"] = [[4.0] * 30 for _ in range(5)]
    assert verdict_of(checks_of(n)).startswith("INCONCLUSIVE: worse of sinusoidal, ALiBi")


def test_the_bpc_table_keeps_learned_past_l_as_not_applicable():
    table = bpc_table(planted(0.0, 0.5))
    assert table["learned"]["4"] is None
    assert table["alibi"]["1"] == [round(sum(r) / len(r), 4) for r in planted(0.0, 0.5)
                                   ["bits"]["alibi"]["1"]]  # fmt: skip


test_settings_are_checked_as_flags = refused(ExtrapolationConfig, [
    ({"seeds": 0}, r"^--seeds 0; it must be >= 1$"),
    ({"factors": "2,4"}, "starting at 1"),
    ({"factors": "1"}, "starting at 1"),
    ({"arms": "sinusoidal,rope"}, "lacks alibi"),
    ({"arms": "sinusoidal,alibi,wavy"}, "position"),
    ({"test_size": 500}, "needs at least 513 characters"),
])


def test_default_settings():
    cfg = ExtrapolationConfig()
    assert cfg.block == 16 * 32 and cfg.factor_list == [1, 2, 4, 8, 16]


def test_the_gap_is_a_t_interval_over_seeds_and_rejudge_keeps_the_run_verdict():
    """Blocks that agree within a seed but seeds that disagree: the interval is the spread of
    the per-seed gaps (t over seeds), not the blocks'; ``rejudge`` recomputes the checks from
    the stored bits and keeps the run's verdict."""
    from attnkit.experiments.extrapolation import rejudge
    from attnkit.experiments.extrapolation.checks import seed_gaps

    n = planted(0.0, 0.5, spread=0.0)
    shifts = [-0.2, 0.15, -0.1, 0.2, -0.05]
    n["bits"]["alibi"]["4"] = [[x + d for x in r] for r, d in
                               zip(n["bits"]["alibi"]["1"], shifts, strict=True)]  # fmt: skip
    gap = seed_gaps(n["bits"]["alibi"]["4"], n["bits"]["alibi"]["1"])
    assert gap.n == 5 and gap.lo < -0.1 and gap.hi > 0.1  # the seeds' spread, not the blocks'
    v = verdict_of(checks_of(n))
    assert v.startswith("INCONCLUSIVE: ALiBi bpc at 4L - at L") and "holds both" in v
    got = rejudge({"numbers": n, "checks": [], "verdict": "REPRODUCED"})
    assert got["verdict"] == v and got["verdict_as_run"] == "REPRODUCED"
    assert rejudge(got) == got


def test_the_cap_is_three_median_stops_on_the_calibration_seeds() -> None:
    """The plateau design's calibration (seeds 900-904, never a verdict's), run before its
    verdict's seeds: every compared arm stopped early, and the default cap is at least 3x
    its median stopping epoch, with the default patience."""
    import statistics

    cfg = ExtrapolationConfig()
    doc = Path(__file__).parents[2] / "docs" / "experiments" / "extrapolation-calibration-900.json"
    cal = json.loads(doc.read_text())
    assert cal["seeds"] == [900, 901, 902, 903, 904] and cal["config"]["patience"] == cfg.patience
    for arm in ("sinusoidal", "alibi"):
        stops = cal["numbers"]["stops"][arm]
        assert not any(cal["numbers"]["censored"][arm]), arm
        assert cfg.cap >= 3 * statistics.median(stops), (arm, stops)


def test_a_quick_run_counts_the_updates_of_the_cap(tmp_path: Path) -> None:
    """The updates an epoch holds and the cap in updates come from the cap of epochs the runs
    trained under (``--cap``), not from ``--epochs`` (the RoPE part's fixed training)."""
    from attnkit.experiments.extrapolation import QUICK, run_experiment

    cfg = ExtrapolationConfig(**{**QUICK, "epochs": 1, "cap": 3})
    result = run_experiment(cfg, tmp_path, say=lambda _: None)
    assert result["cap_updates"] == 3 * result["updates_per_epoch"] > 0
    assert set(result["stopping_epochs"].values()) <= {1, 2, 3}


def test_the_position_runs_stop_early_under_the_cap_and_the_rope_base_does_not(
        tmp_path: Path) -> None:  # fmt: skip
    """Every run of the positions part trains with the early-stopping patience and ``--cap``
    epochs; the RoPE part's base model keeps its fixed ``--epochs`` without early stopping."""
    from attnkit.experiments.extrapolation.jobs import fit_config, make_jobs

    cfg = ExtrapolationConfig(epochs=3, cap=30, patience=2)
    jobs = make_jobs(cfg, tmp_path)
    assert {(j.train.epochs, j.train.patience) for j in jobs.values()} == {(30, 2)}
    base = fit_config(cfg, "rope", 0, tmp_path)
    assert (base.train.epochs, base.train.patience) == (3, 0)
