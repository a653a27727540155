"""Fault injection into checkpoint rotation: the Nth filesystem operation of a save "kills" the
process (raises, and every later operation under the folder raises too, as nothing runs after a
SIGKILL), for every N. After each kill, what ``translate``/``evaluate`` (resolve, load) and
``--resume`` (find_checkpoint, load_training) find is a complete checkpoint, the old one or the
new one, never a mix; and the next save leaves nothing behind."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch

from attnkit.data.vocab import Vocab
from attnkit.models import build_model
from attnkit.train import checkpoint

pytestmark = pytest.mark.usefixtures("one_thread_module")


class Killed(BaseException):
    """The simulated SIGKILL: a BaseException, so no ``except Exception`` cleanup runs."""


class Faults:
    """Counts the filesystem operations under ``root`` and kills the process at number
    ``kill_at`` (1-based; 0 never). A kill in the middle of a write leaves half a file."""

    def __init__(self, root: Path, kill_at: int = 0) -> None:
        self.root, self.kill_at, self.log = str(root), kill_at, []  # type: list[str]
        self.dead = False

    def op(self, name: str, path: Any) -> bool:
        """Record one operation; True when it is the killing one (the caller then acts)."""
        if not os.fspath(path).startswith(self.root):
            return False
        if self.dead:
            raise Killed(f"{name} after the kill")
        self.log.append(f"{name} {Path(path).relative_to(self.root)}")
        if len(self.log) == self.kill_at:
            self.dead = True
            return True
        return False

    @contextmanager
    def patched(self, monkeypatch: pytest.MonkeyPatch) -> Iterator[Faults]:
        real = {n: getattr(os, n) for n in ("mkdir", "replace", "unlink", "rmdir")}

        def wrap(name: str):  # noqa: ANN202
            def f(path: Any, *args: Any, **kw: Any) -> Any:
                if self.op(name, path):
                    raise Killed(name)
                return real[name](path, *args, **kw)

            return f

        for name in real:
            monkeypatch.setattr(os, name, wrap(name))
        for name in ("rename", "remove", "rmtree"):  # a save must not use these: uncounted
            mod = __import__("shutil") if name == "rmtree" else os
            orig = getattr(mod, name)

            def banned(path: Any, *a: Any, _n: str = name, _o: Any = orig, **k: Any) -> Any:
                assert not os.fspath(path).startswith(self.root), f"uncounted {_n}"
                return _o(path, *a, **k)

            monkeypatch.setattr(mod, name, banned)
        real_write = checkpoint.write_file

        def write(path: Path, data: bytes) -> None:
            if self.op("write", path):
                real_write(path, data[: len(data) // 2])
                raise Killed("write")
            real_write(path, data)

        monkeypatch.setattr(checkpoint, "write_file", write)
        try:
            yield self
        finally:
            monkeypatch.undo()


SV = [Vocab.build([list("abc")]), Vocab.build([list("abcd")]), Vocab.build([list("abcde")])]


def version(n: int) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    """Model and optimizer number ``n``: different weights, different Adam moments."""
    torch.manual_seed(n)
    model = build_model("rnnsearch", src_vocab=9, tgt_vocab=9, preset="tiny")
    opt = torch.optim.Adam(model.parameters(), lr=0.01 * (n + 1))
    model(torch.tensor([[4, 2]]), torch.tensor([2]), torch.tensor([[1, 5]])).logits.sum().backward()
    opt.step()
    return model, opt


VERSIONS = [version(n) for n in range(3)]


def save(path: Path, n: int, resumable: bool = True) -> None:
    model, opt = VERSIONS[n]
    checkpoint.save(
        path,
        model,  # type: ignore[arg-type]
        "rnnsearch",
        SV[n],
        SV[n],
        meta={"n": n},
        optimizer=opt if resumable else None,
        train_state={"n": n, "epoch": n} if resumable else None,
    )


def same_weights(a: dict[str, torch.Tensor], n: int) -> bool:
    ref = VERSIONS[n][0].state_dict()
    return a.keys() == ref.keys() and all(torch.equal(a[k], ref[k]) for k in ref)


def check_load(path: Path, allowed: set[int]) -> int:
    """What translate/evaluate read: one version, whole (meta, weights and vocab agree)."""
    loaded = checkpoint.load(path)
    n = loaded.meta["n"]
    assert n in allowed, f"{path} resolved to version {n}, expected one of {allowed}"
    assert same_weights(loaded.model.state_dict(), n)
    assert loaded.src_vocab.tokens == SV[n].tokens
    return n


def check_resume(out: Path, allowed: set[int]) -> int:
    """What --resume reads: one version, whole (train_state, weights, optimizer agree)."""
    found = checkpoint.find_checkpoint(out, "last", resumable=True)
    assert found is not None, f"nothing resumable in {sorted(os.listdir(out))}"
    model = build_model("rnnsearch", src_vocab=9, tgt_vocab=9, preset="tiny")
    opt = torch.optim.Adam(model.parameters())
    n = checkpoint.load_training(out / "last", model, opt)["n"]
    assert n in allowed and same_weights(model.state_dict(), n)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.01 * (n + 1))
    ref = VERSIONS[n][1].state_dict()["state"]
    for i, st in opt.state_dict()["state"].items():
        assert torch.equal(st["exp_avg"], ref[i]["exp_avg"])
    return n


def ops_of_one_save(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, before: list[int]) -> int:
    out = tmp_path / "count"
    for n in before:
        save(out / "last", n)
    with Faults(out).patched(monkeypatch) as f:
        save(out / "last", 2)
    return len(f.log)


def test_the_rotation_is_the_documented_sequence(tmp_path, monkeypatch) -> None:
    out = tmp_path / "run"
    save(out / "last", 0)
    with Faults(out).patched(monkeypatch) as f:
        save(out / "last", 1)
    pid = os.getpid()
    names = [*checkpoint.FILES, *checkpoint.TRAINING_FILES]
    assert f.log[: 4 + len(names)] == [
        "mkdir .",  # the parent, which exists
        f"mkdir .last.tmp-{pid}",
        *[f"write .last.tmp-{pid}/{n}" for n in names],
        "replace last",  # last -> .last.old
        f"replace .last.tmp-{pid}",  # .last.tmp-PID -> last
    ]
    unlinks = f.log[4 + len(names) : -1]  # in the order the folder lists them
    assert sorted(unlinks) == sorted(f"unlink .last.old/{n}" for n in names)
    assert f.log[-1] == "rmdir .last.old"


@pytest.mark.parametrize("before", [[], [0], [0, 1]], ids=["first", "second", "third"])
def test_a_kill_at_every_step_of_last_leaves_a_resumable_checkpoint(
    tmp_path, monkeypatch, before
) -> None:
    total = ops_of_one_save(tmp_path, monkeypatch, before)
    assert total >= 9
    for k in range(1, total + 1):
        out = tmp_path / f"kill{k}"
        for n in before:
            save(out / "last", n)
        with Faults(out, kill_at=k).patched(monkeypatch), pytest.raises(Killed):
            save(out / "last", 2)
        allowed = {before[-1], 2} if before else {2}
        if before or checkpoint.find_checkpoint(out, "last") is not None:
            assert check_load(out / "last", allowed) == check_load(out, allowed)
            check_resume(out, allowed)
        else:  # the very first save died: nothing to find, and it says so
            with pytest.raises(FileNotFoundError, match="attnkit train"):
                checkpoint.load(out)
        save(out / "last", 1)  # the next save (a resumed run) cleans every leftover
        assert sorted(os.listdir(out)) == ["last"], f"kill at op {k}"
        assert check_resume(out, {1}) == 1


def test_a_kill_at_every_step_after_an_interrupted_save(tmp_path, monkeypatch) -> None:
    """Two kills in a row: the second at every step of the next save, after a first kill that
    left each kind of leftover (a half-written temporary; only ``.last.old``; ``last`` with a
    half-removed ``.last.old``)."""
    first, kinds = ops_of_one_save(tmp_path, monkeypatch, [0]), {}
    for k1 in range(1, first + 1):
        probe = tmp_path / f"probe{k1}"
        save(probe / "last", 0)
        with Faults(probe, kill_at=k1).patched(monkeypatch), pytest.raises(Killed):
            save(probe / "last", 1)
        kinds.setdefault(tuple(sorted(os.listdir(probe))), k1)
    assert len(kinds) >= 4, kinds  # the three above, and a kill before the temporary exists
    for k1 in kinds.values():
        probe = tmp_path / f"probe{k1}"
        with Faults(probe).patched(monkeypatch) as f:
            save(probe / "last", 2)
        for k2 in range(1, len(f.log) + 1):
            out = tmp_path / f"kill{k1}-{k2}"
            save(out / "last", 0)
            with Faults(out, kill_at=k1).patched(monkeypatch), pytest.raises(Killed):
                save(out / "last", 1)
            with Faults(out, kill_at=k2).patched(monkeypatch), pytest.raises(Killed):
                save(out / "last", 2)
            assert check_load(out, {0, 1, 2}) == check_resume(out, {0, 1, 2})
            save(out / "last", 0)
            assert sorted(os.listdir(out)) == ["last"], f"kills at ops {k1}, {k2}"


def test_a_kill_at_every_step_of_best_never_falls_back_to_last(tmp_path, monkeypatch) -> None:
    """While ``best`` rotates, ``resolve(DIR)`` (translate, evaluate) finds a best model, the old
    one or the new one, and never the ``last`` checkpoint beside it."""
    probe = tmp_path / "probe"
    save(probe / "best", 1, resumable=False)
    with Faults(probe).patched(monkeypatch) as f:
        save(probe / "best", 2, resumable=False)
    for k in range(1, len(f.log) + 1):
        out = tmp_path / f"kill{k}"
        save(out / "last", 0)
        save(out / "best", 1, resumable=False)
        with Faults(out, kill_at=k).patched(monkeypatch), pytest.raises(Killed):
            save(out / "best", 2, resumable=False)
        assert check_load(out, {1, 2}) == check_load(out / "best", {1, 2})
        assert checkpoint.find_checkpoint(out, "best") is not None
        assert check_resume(out, {0}) == 0


def test_temporaries_of_dead_processes_are_removed_and_live_ones_kept(tmp_path) -> None:
    import subprocess
    import sys

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead_pid, live_pid = int(dead.stdout), os.getppid()
    out = tmp_path / "run"
    (out / f".last.tmp-{dead_pid}").mkdir(parents=True)
    (out / f".last.tmp-{dead_pid}" / "config.json").write_text("{")
    (out / f".last.tmp-{live_pid}").mkdir()
    (out / f".history.json.tmp-{dead_pid}").write_text("[")
    save(out / "last", 0)
    checkpoint.write_text(out / "history.json", "[]")
    assert sorted(os.listdir(out)) == [f".last.tmp-{live_pid}", "history.json", "last"]
