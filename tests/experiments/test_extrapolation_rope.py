"""The extrapolation experiment's RoPE part (experiments/extrapolation/rope*.py, finetune.py):
the fine-tune's pieces against hand computations, its checks on planted numbers (each of the
three outcomes, and only the compared arms deciding), its settings, and a --quick run."""

from __future__ import annotations

import json
import random

import pytest
import torch

from attnkit.data.lm_text import generate_text
from attnkit.data.vocab import Vocab
from attnkit.experiments.evidence import verdict_of
from attnkit.experiments.extrapolation import ExtrapolationConfig, rejudge
from attnkit.experiments.extrapolation.finetune import (
    WARMUP,
    batch_rows,
    fine_tune,
    lr_of,
    scaled,
    small_budget,
    windows,
)
from attnkit.experiments.extrapolation.rope_checks import checks_of
from attnkit.models import build_model
from attnkit.stages.position import RotaryPosition

TEXT = generate_text(400, seed=5)
VOCAB = Vocab.build([list(TEXT)])


def tiny_rope(max_len: int = 8):  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    return build_model("transformer-lm", src_vocab=4, tgt_vocab=len(VOCAB), dim=16, heads=2,
                       layers=1, ff=16, dropout=0.0, position="rope", max_len=max_len
                       ).eval()  # fmt: skip


def rotaries(model) -> list[RotaryPosition]:  # type: ignore[no-untyped-def]
    return [m for m in model.modules() if isinstance(m, RotaryPosition)]


def test_scaled_copies_the_weights_and_stretches_only_the_rotation():
    model = tiny_rope(max_len=8)
    ids = torch.tensor([VOCAB.encode(list(TEXT[:16]), eos=False)])  # (1, 16)
    before = model(ids).logits
    plain = scaled(model, "none", 1)
    assert torch.equal(plain(ids).logits, before)  # "none": the same model
    pi = scaled(model, "linear", 4)
    for name, tensor in model.state_dict().items():
        assert torch.equal(pi.state_dict()[name], tensor)
    (rot,) = rotaries(pi)
    assert (rot.scaling, rot.factor, rot.original_len) == ("linear", 4.0, 8)
    assert torch.allclose(rot.theta, 10000.0 ** -(torch.arange(0, 8, 2).double() / 8) / 4)
    assert not torch.allclose(pi(ids).logits, before)
    assert rotaries(model)[0].scaling == "none"  # the base model is untouched
    assert torch.equal(model(ids).logits, before)


def test_windows_are_consecutive_pieces_and_their_next_characters():
    ids = torch.arange(23)
    inputs, targets = windows(ids, 5)  # (22 // 5 = 4 windows)
    assert inputs.tolist() == [list(range(s, s + 5)) for s in range(0, 20, 5)]
    assert targets.tolist() == [list(range(s + 1, s + 6)) for s in range(0, 20, 5)]
    with pytest.raises(ValueError, match="hold no window of 30"):
        windows(ids, 30)


def test_each_pass_reads_every_window_once_in_an_order_fixed_by_its_key():
    n, rows = 12, 4
    one_pass = torch.cat([batch_rows(n, rows, step, (3, 2)) for step in range(3)])
    assert sorted(one_pass.tolist()) == list(range(n))
    again = torch.cat([batch_rows(n, rows, step, (3, 2)) for step in range(3)])
    assert torch.equal(one_pass, again)
    second = torch.cat([batch_rows(n, rows, step, (3, 2)) for step in range(3, 6)])
    assert sorted(second.tolist()) == list(range(n)) and not torch.equal(second, one_pass)
    other = torch.cat([batch_rows(n, rows, step, (4, 2)) for step in range(3)])
    assert not torch.equal(other, one_pass)


def test_the_learning_rate_warms_up_from_a_tenth():
    assert lr_of(1.0, 0) == pytest.approx(0.1)
    assert lr_of(1.0, 1) == pytest.approx(0.1 + 0.9 / WARMUP)
    assert lr_of(2.0, WARMUP) == pytest.approx(2.0) and lr_of(2.0, 5 * WARMUP) == 2.0
    assert small_budget(1000) == 400 and small_budget(200) == 80 and small_budget(1) == 1


def test_fine_tune_is_deterministic_and_scores_at_the_asked_steps(one_thread):
    ids = torch.tensor(VOCAB.encode(list(TEXT), eos=False))
    seen: dict[int, float] = {}

    def at(step):  # type: ignore[no-untyped-def]
        return lambda m: seen.__setitem__(step, float(m(ids[None, :16]).logits.detach().sum()))

    a, b = tiny_rope(), tiny_rope()
    start = float(a(ids[None, :16]).logits.detach().sum())
    losses = fine_tune(a, ids, 16, 3, 6, 1e-2, 0, (0, 2), {0: at(0), 2: at(2), 6: at(6)})
    assert len(losses) == 6 and sorted(seen) == [0, 2, 6]
    assert seen[0] == start and seen[2] != start
    fine_tune(b, ids, 16, 3, 6, 1e-2, 0, (0, 2))
    for name, tensor in a.state_dict().items():
        assert torch.equal(b.state_dict()[name], tensor)
    assert not a.training


def planted(*, degrade=0.5, recover=-0.05, helps=1.0, lead=0.05, short=0.05, unigram=4.0,
            spread=0.01, seeds=5):  # type: ignore[no-untyped-def]
    """``seeds`` x 30 blocks; factors 1, 2, 4, fine-tune read after 0, 4, 10. Each gap of a
    claim is planted on the blocks (``spread``: the noise of each block)."""
    rng = random.Random(0)

    def noisy(rows, d):  # type: ignore[no-untyped-def]
        return [[x + d + spread * rng.gauss(0, 1) for x in r] for r in rows]

    base1 = [[1.5 + 0.05 * rng.gauss(0, 1) for _ in range(30)] for _ in range(seeds)]
    control = {"0": base1, "4": noisy(base1, -0.05), "10": noisy(base1, -0.1)}

    def scaling(edge: float) -> dict:  # type: ignore[type-arg]
        out = {}
        for k in ("2", "4"):
            end = noisy(control["10"], recover)
            out[k] = {"10": end, "4": noisy(end, short), "0": noisy(end, helps)}
        out["2"]["4"] = noisy(out["2"]["4"], edge)
        return out

    return {
        "unigram": [unigram] * seeds,
        "steps": [0, 4, 10],
        "base": {"1": base1, "2": noisy(base1, degrade), "4": noisy(base1, degrade)},
        "continued": control,
        "scaled": {"linear": scaling(0.0), "ntk": scaling(0.0), "yarn": scaling(-lead)},
    }


def test_the_checks_give_each_outcome():
    assert verdict_of(checks_of(planted())) == "REPRODUCED"
    flat = verdict_of(checks_of(planted(degrade=-0.1)))
    assert flat.startswith("NOT REPRODUCED: RoPE bpc at 4L - at L"), flat
    worse = verdict_of(checks_of(planted(recover=0.2)))
    assert worse.startswith("NOT REPRODUCED: PI after 10 at 4L - control after 10 at L"), worse
    useless = verdict_of(checks_of(planted(helps=-0.2)))
    assert useless.startswith("NOT REPRODUCED: PI at 4L: after 0 - after 10"), useless
    behind = verdict_of(checks_of(planted(lead=-0.1)))
    assert behind.startswith("NOT REPRODUCED: at 2L after 4: PI bpc - YaRN bpc"), behind
    tie = verdict_of(checks_of(planted(lead=0.0, spread=0.05)))
    assert tie.startswith("INCONCLUSIVE: at 2L after 4: PI bpc - YaRN bpc"), tie
    assert "holds both" in tie
    converged = verdict_of(checks_of(planted(short=-0.05)))
    assert converged.startswith("INCONCLUSIVE: PI bpc at 2L after 4 - after 10"), converged
    assert "not short for PI" in converged
    few = verdict_of(checks_of(planted(seeds=3)))
    assert few.startswith("INCONCLUSIVE: seeds for a check (at least 5): 3"), few
    unlearned = verdict_of(checks_of(planted(unigram=1.6)))
    assert unlearned.startswith("INCONCLUSIVE: RoPE bpc at L / unigram bpc"), unlearned


def test_only_the_compared_arms_decide():
    """NTK-aware scaling and direct fine-tuning are reported, not compared: one at the floor
    (unigram-level bits in every cell) leaves the verdict alone; PI at the floor withholds it."""
    n = planted()
    floor = lambda: [[4.0] * 30 for _ in range(5)]  # noqa: E731
    n["scaled"]["ntk"] = {k: {t: floor() for t in ("0", "4", "10")} for k in ("2", "4")}
    n["scaled"]["none"] = {k: {t: floor() for t in ("0", "4", "10")} for k in ("2", "4")}
    assert verdict_of(checks_of(n)) == "REPRODUCED"
    n["scaled"]["linear"]["4"] = {t: floor() for t in ("0", "4", "10")}
    v = verdict_of(checks_of(n))
    assert v.startswith("INCONCLUSIVE: PI after 10 at 4L, off the floor"), v


def test_settings_are_checked_as_flags():
    with pytest.raises(ValueError, match="--part 'alibi': choose one of positions, rope"):
        ExtrapolationConfig(part="alibi")
    with pytest.raises(ValueError, match="--rope-factors '1,2,8' lacks 4"):
        ExtrapolationConfig(part="rope", rope_factors="1,2,8")
    with pytest.raises(ValueError, match="--rope-factors '2,4': give increasing integers"):
        ExtrapolationConfig(part="rope", rope_factors="2,4")
    with pytest.raises(ValueError, match="with linear and yarn"):
        ExtrapolationConfig(part="rope", scalings="linear,ntk")
    with pytest.raises(ValueError, match="unknown RoPE scaling 'wavy'"):
        ExtrapolationConfig(part="rope", scalings="linear,yarn,wavy")
    with pytest.raises(ValueError, match=r"^--finetune-steps 0; it must be >= 1$"):
        ExtrapolationConfig(part="rope", finetune_steps=0)
    cfg = ExtrapolationConfig(part="rope", scalings="pi,yarn")
    assert cfg.scaling_list == ["linear", "yarn"]
    assert cfg.factor_list == [1, 2, 4, 8] and cfg.block == 8 * 32
    assert ExtrapolationConfig().block == 16 * 32  # the positions part keeps its lengths


def test_the_quick_rope_part_writes_its_own_outputs(tmp_path, one_thread, capsys):
    from attnkit.cli import main

    out = tmp_path / "rope"
    assert main(["experiment", "extrapolation", "--quick", "--part", "rope", "--seed", "1",
                 "--out", str(out)]) == 0  # fmt: skip
    assert "verdict" in capsys.readouterr().out
    result = json.loads((out / "extrapolation-rope.json").read_text())
    assert result["part"] == "rope" and result["config"]["seed"] == 1
    assert result["numbers"]["steps"] == [0, 2, 5]
    assert set(result["numbers"]["scaled"]) == {"linear", "yarn"}
    assert set(result["numbers"]["scaled"]["yarn"]) == {"2", "4"}
    assert not (out / "extrapolation.json").exists()
    assert (out / "extrapolation-rope.csv").read_text().count("\n") >= 2
    assert (out / "extrapolation-rope.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    again = rejudge(result)
    assert again["verdict"] == result["verdict"] and again["checks"] == result["checks"]
