"""Checkpoints round-trip exactly, hold no pickles, and are replaced atomically."""

import json

import pytest
import torch

from attnkit.data.vocab import Vocab
from attnkit.models import build_model
from attnkit.train import checkpoint

pytestmark = pytest.mark.usefixtures("one_thread_module")


def test_round_trip_gives_the_same_model(tmp_path) -> None:
    torch.manual_seed(0)
    model = build_model("rnnsearch", src_vocab=9, tgt_vocab=8, preset="tiny")
    sv, tv = Vocab.build([list("abcde")]), Vocab.build([list("wxyz")])
    checkpoint.save(tmp_path / "ck", model, "rnnsearch", sv, tv, meta={"task": "toy-ko"})
    files = sorted(p.name for p in (tmp_path / "ck").iterdir())
    assert files == ["config.json", "model.safetensors", "src_vocab.json", "tgt_vocab.json"]
    assert json.loads((tmp_path / "ck" / "config.json").read_text())["model"] == "rnnsearch"
    loaded = checkpoint.load(tmp_path / "ck")
    assert loaded.src_vocab.tokens == sv.tokens and loaded.meta == {"task": "toy-ko"}
    for (k, a), (k2, b) in zip(
        model.state_dict().items(), loaded.model.state_dict().items(), strict=True
    ):
        assert k == k2 and torch.equal(a, b)
    src, n, tgt = torch.tensor([[4, 5, 2]]), torch.tensor([3]), torch.tensor([[1, 4]])
    model.eval()
    torch.testing.assert_close(model(src, n, tgt).logits, loaded.model(src, n, tgt).logits)


def test_optimizer_state_round_trips(tmp_path) -> None:
    torch.manual_seed(0)
    model = build_model("rnnencdec", src_vocab=9, tgt_vocab=8, preset="tiny")
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.tensor([[4, 2]]), torch.tensor([2]), torch.tensor([[1, 5]])).logits.sum().backward()
    opt.step()
    sv = Vocab.build([["a"]])
    checkpoint.save(
        tmp_path / "last", model, "rnnencdec", sv, sv, optimizer=opt, train_state={"epoch": 3}
    )
    rng = torch.get_rng_state()  # what the checkpoint recorded
    model2 = build_model("rnnencdec", src_vocab=9, tgt_vocab=8, preset="tiny")
    opt2 = torch.optim.Adam(model2.parameters(), lr=0.5)
    torch.rand(5)
    state = checkpoint.load_training(tmp_path / "last", model2, opt2)
    assert state["epoch"] == 3 and torch.equal(torch.get_rng_state(), rng)
    a, b = opt.state_dict(), opt2.state_dict()
    assert a["param_groups"][0]["lr"] == b["param_groups"][0]["lr"] == 0.01
    for i, st in a["state"].items():
        for key, val in st.items():
            assert torch.equal(torch.as_tensor(val), torch.as_tensor(b["state"][i][key]))


def test_missing_checkpoint_says_what_to_do(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="attnkit train"):
        checkpoint.load(tmp_path)


def test_a_later_save_replaces_the_whole_directory(tmp_path) -> None:
    model = build_model("rnnsearch", src_vocab=9, tgt_vocab=8, preset="tiny")
    sv = Vocab.build([["a"]])
    checkpoint.save(tmp_path / "ck", model, "rnnsearch", sv, sv, meta={"n": 1})
    checkpoint.save(tmp_path / "ck", model, "rnnsearch", sv, sv, meta={"n": 2})
    assert checkpoint.load(tmp_path / "ck").meta == {"n": 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck"]  # no temporaries left


def test_resuming_into_a_different_model_fails_clearly(tmp_path) -> None:
    model = build_model("rnnsearch", src_vocab=9, tgt_vocab=8, preset="tiny")
    opt = torch.optim.Adam(model.parameters())
    sv = Vocab.build([["a"]])
    checkpoint.save(tmp_path / "last", model, "rnnsearch", sv, sv, optimizer=opt)
    other = build_model("rnnsearch", src_vocab=9, tgt_vocab=8, preset="small")
    with pytest.raises(ValueError, match="does not fit this model"):
        checkpoint.load_training(tmp_path / "last", other, torch.optim.Adam(other.parameters()))


def test_a_folder_holding_user_files_is_never_replaced(tmp_path) -> None:
    model = build_model("rnnsearch", src_vocab=9, tgt_vocab=8, preset="tiny")
    sv = Vocab.build([["a"]])
    checkpoint.save(tmp_path / "best", model, "rnnsearch", sv, sv, meta={"n": 1})
    (tmp_path / "best" / "notes.txt").write_text("my notes")
    with pytest.raises(ValueError, match=r"best holds files attnkit did not write \(notes.txt\)"):
        checkpoint.save(tmp_path / "best", model, "rnnsearch", sv, sv, meta={"n": 2})
    assert (tmp_path / "best" / "notes.txt").read_text() == "my notes"
    assert checkpoint.load(tmp_path / "best").meta == {"n": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best"]  # nothing half-written
    (tmp_path / "last").write_text("a file, not a folder")
    with pytest.raises(ValueError, match="last is a file, not a checkpoint folder"):
        checkpoint.save(tmp_path / "last", model, "rnnsearch", sv, sv)
    assert (tmp_path / "last").read_text() == "a file, not a folder"


def test_resolve_finds_the_backup_of_an_interrupted_rotation(tmp_path) -> None:
    model = build_model("rnnsearch", src_vocab=9, tgt_vocab=8, preset="tiny")
    sv = Vocab.build([["a"]])
    checkpoint.save(tmp_path / "best", model, "rnnsearch", sv, sv, meta={"n": 1})
    (tmp_path / "best").rename(tmp_path / ".best.old")  # killed between the two renames
    assert checkpoint.find_checkpoint(tmp_path, "best") == tmp_path / ".best.old"
    assert checkpoint.find_checkpoint(tmp_path, "last") is None
    assert checkpoint.resolve(tmp_path) == checkpoint.resolve(tmp_path / "best")
    assert checkpoint.load(tmp_path / "best").meta == {"n": 1}
    (tmp_path / ".best.old" / "model.safetensors").unlink()  # half removed: not a checkpoint
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        checkpoint.resolve(tmp_path)
    with pytest.raises(ValueError, match="pass 'best' or 'last'"):
        checkpoint.find_checkpoint(tmp_path, "bset")
