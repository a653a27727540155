"""The stopping rules, alone and inside the loop (with scripted validation scores, so that
each rule's moment is known exactly)."""

import json
from pathlib import Path

import pytest
import torch

from attnkit.data.tasks import load_task
from attnkit.data.vocab import Vocab
from attnkit.models import build_model
from attnkit.train import loop, stopping
from attnkit.train.config import TrainConfig
from attnkit.train.stopping import EpochProgress, after_epoch, within_step

pytestmark = pytest.mark.usefixtures("one_thread_module")


def test_rules_alone() -> None:
    cfg = TrainConfig(epochs=5, patience=2, target_exact=0.9, time_limit=10)
    assert after_epoch(cfg, EpochProgress(1, 0, 0.5)) is None
    assert after_epoch(cfg, EpochProgress(2, 1, 0.5)) is None
    assert after_epoch(cfg, EpochProgress(3, 2, 0.5)) == "early stopping"
    assert after_epoch(cfg, EpochProgress(2, 0, 0.9)) == "target exact match"
    assert after_epoch(cfg, EpochProgress(2, 0, None)) is None  # nothing decoded: no target
    assert after_epoch(cfg, EpochProgress(5, 0, 0.5)) == "epochs"
    assert after_epoch(cfg, EpochProgress(5, 2, 0.5)) == "early stopping"  # names the real cause
    assert within_step(cfg, 9.9) is None and within_step(cfg, 10.1) == "time limit"
    off = TrainConfig(epochs=5, patience=0, target_exact=0.0, time_limit=0)
    assert after_epoch(off, EpochProgress(4, 9, 1.0)) is None
    assert within_step(off, 1e9) is None


def _run(tmp_path: Path, monkeypatch, scores: list[tuple[float, float]], **cfg) -> loop.TrainResult:
    sp = load_task("copy", seed=0, train_size=32, valid_size=8, test_size=8, max_len=6)
    sv, tv = Vocab.build(e.src for e in sp.train), Vocab.build(e.tgt for e in sp.train)
    torch.manual_seed(0)
    model = build_model("rnnsearch", src_vocab=len(sv), tgt_vocab=len(tv), preset="tiny")
    script = iter(scores)
    monkeypatch.setattr(loop, "validate", lambda *a: loop.Validation(*next(script)))
    config = TrainConfig(batch_size=16, progress=False, **cfg)
    return loop.train(model, "rnnsearch", sp.train, sp.valid, sv, tv, config, tmp_path,
                      log=lambda s: None)  # fmt: skip


def test_early_stopping_in_the_loop(tmp_path: Path, monkeypatch) -> None:
    scores = [(1.0, 0.1), (1.1, 0.2), (0.9, 0.3), (1.2, 0.3), (1.3, 0.3), (0.1, 0.3)]
    r = _run(tmp_path, monkeypatch, scores, epochs=6, patience=2)
    assert r.stopped == "early stopping" and r.epochs_run == 5
    assert r.best_valid_loss == 0.9
    best = json.loads((tmp_path / "best" / "config.json").read_text())["meta"]
    assert best["epoch"] == 3 and best["valid_loss"] == 0.9


def test_target_exact_in_the_loop(tmp_path: Path, monkeypatch) -> None:
    scores = [(1.0, 0.5), (0.9, 0.94), (0.8, 0.95), (0.7, 1.0)]
    r = _run(tmp_path, monkeypatch, scores, epochs=4, target_exact=0.95)
    assert r.stopped == "target exact match" and r.epochs_run == 3


def test_epochs_and_time_limit_in_the_loop(tmp_path: Path, monkeypatch) -> None:
    r = _run(tmp_path, monkeypatch, [(1.0, 0.0), (0.9, 0.0)], epochs=2, patience=0)
    assert r.stopped == "epochs" and r.epochs_run == 2 and r.steps == 4
    r = _run(tmp_path / "t", monkeypatch, [(1.0, 0.0)], epochs=50, time_limit=1e-9)
    assert r.stopped == "time limit" and r.steps == 1  # after the update that crossed it
    hist = json.loads((tmp_path / "t" / "history.json").read_text())
    assert len(hist) == 1 and hist[0]["valid_loss"] == 1.0


def test_interrupt_saves_last_and_history(tmp_path: Path, monkeypatch) -> None:
    """Ctrl-C (the deferred flag) ends after the current update with last/ and history."""
    calls = {"n": 0}
    real_step = loop.train_step

    def step_then_interrupt(t, b, step):
        calls["n"] += 1
        value = real_step(t, b, step)
        if step == 3:
            import os
            import signal

            os.kill(os.getpid(), signal.SIGINT)
        return value

    monkeypatch.setattr(loop, "train_step", step_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path, monkeypatch, [(1.0, 0.0)] * 9, epochs=9)
    state = json.loads((tmp_path / "last" / "train_state.json").read_text())
    assert state["global_step"] == 3 == calls["n"]
    assert len(json.loads((tmp_path / "history.json").read_text())) == 1  # epoch 1 (2 steps)
    assert stopping.INTERRUPTED == "interrupted"


class _AgreeingRanks:
    """A stand-in for DistContext.stop_together whose collective is where Ctrl-C arrives:
    on the first call the signal's handler sets the flag while the ranks are agreeing (after
    this rank's answer was sent), so the agreement says go on; later calls agree with it."""

    def __init__(self, flag: list[bool]) -> None:
        self.flag, self.calls = flag, 0

    def stop_together(self, stop: bool) -> bool:
        self.calls += 1
        if self.calls == 1:
            self.flag[0] = True  # the handler runs during the collective
        return stop


def test_a_ctrl_c_during_the_ranks_agreement_stops_after_the_next_update() -> None:
    """Under DDP a signal that lands while the ranks agree is not lost: the flag the handler
    set survives the agreement (which said go on) and stops the ranks after the next update.
    Writing the agreement back into the flag lost it, and the run went on to its end."""
    flag = [False]
    ranks = _AgreeingRanks(flag)
    assert loop.stop_agreed(ranks, flag) is False and flag == [True]
    assert loop.stop_agreed(ranks, flag) is True


def test_without_ranks_the_flag_alone_decides() -> None:
    assert loop.stop_agreed(None, [False]) is False
    assert loop.stop_agreed(None, [True]) is True
