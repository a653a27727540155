"""``attnkit.fit``, the library entry point: a run from a FitConfig alone, the same run twice
gives the same numbers and weights, and bad settings fail at construction."""

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import attnkit
from attnkit.train.config import DataConfig, FitConfig, ModelConfig, TrainConfig

pytestmark = pytest.mark.usefixtures("one_thread_module")


def config(out: Path, **train) -> FitConfig:
    return FitConfig(
        data=DataConfig(task="copy", train_size=48, valid_size=8, test_size=8, max_len=6),
        model=ModelConfig("rnnsearch", "tiny", {"emb": 12}),
        train=TrainConfig(epochs=2, batch_size=16, lr=1e-2, progress=False, **train),
        out=out,
    )


def test_fit_trains_and_is_deterministic(tmp_path: Path) -> None:
    a = attnkit.fit(config(tmp_path / "a"), log=lambda s: None)
    b = attnkit.fit(config(tmp_path / "b"), log=lambda s: None)
    assert a.steps == 6 and a.epochs_run == 2 and a.stopped == "epochs"
    assert a.history == [{**r, "seconds": a.history[i]["seconds"]} for i, r in enumerate(b.history)]
    assert a.data is not None and len(a.data.test) == 8 and a.best == tmp_path / "a" / "best"
    best = load_file(str(a.best / "model.safetensors"))
    assert a.parameters == sum(t.numel() for t in best.values())
    wa = load_file(str(a.last / "model.safetensors"))
    wb = load_file(str(b.last / "model.safetensors"))
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    meta = json.loads((a.best / "config.json").read_text())["meta"]
    assert meta["task"] == "copy" and meta["train"]["lr"] == 1e-2


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: DataConfig(task="copy", train_size=0), "train_size=0; it must be at least 1"),
        (lambda: DataConfig(task="copy", valid_size=0), "valid_size=0"),
        (lambda: DataConfig(), "say what to train on"),
        (lambda: DataConfig(task="copy", train_tsv="x.tsv"), "either task or corpus files"),
        (lambda: TrainConfig(clip=math.nan), "clip=nan; it must be a finite number"),
        (lambda: TrainConfig(lr=math.inf), "lr=inf; it must be a finite number"),
        (lambda: TrainConfig(target_exact=2), "target_exact=2"),
        (lambda: ModelConfig("rnnsearch", "small", {"emb": 0}), "emb=0"),
        (lambda: ModelConfig("nope"), "unknown model 'nope'"),
        (lambda: FitConfig(DataConfig(task="copy"), out=""), "^out is empty"),
        (lambda: FitConfig(DataConfig(task="copy"), out="x", resume=True, overwrite=True),
         "pick one"),
        (lambda: FitConfig(DataConfig(task="copy"), out="x", threads=0), "^threads=0"),
    ],
)  # fmt: skip
def test_bad_settings_fail_at_construction(make, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        make()


# a library user reads the field names; ``attnkit train`` the same message with its flags
FIELD_VS_FLAG = [
    (dict(data=dict(task="copy", train_size=0)), "train_size=0; it must be at least 1",
     ["--task", "copy", "--train-size", "0"], "--train-size 0; it must be at least 1"),
    (dict(out=""), "out is empty; name a folder for the run (e.g. runs/NAME)",
     ["--task", "copy", "--out", ""], "--out is empty; name a folder for the run (e.g. runs/NAME)"),
    (dict(data=dict(task="toy-ko", docs_csv="x.csv")),
     "docs_csv goes with task docs (documents with a label)",
     ["--task", "toy-ko", "--docs-csv", "x.csv"],
     "--docs-csv goes with --task docs (documents with a label)"),
    (dict(data=dict(task="copy", max_len=5000)), "max_len=5000: generated copy/reverse/sort",
     ["--task", "copy", "--max-len", "5000"], "--max-len 5000: generated copy/reverse/sort"),
    (dict(train=dict(batch_size=0)), "epochs=20, batch_size=0; both must be >= 1",
     ["--task", "copy", "--batch-size", "0"], "--epochs 20, --batch-size 0; both must be >= 1"),
    (dict(device="tpu"), "device='tpu'; choose auto, cpu or cuda",
     ["--task", "copy", "--device", "tpu"], "--device 'tpu'; choose auto, cpu or cuda"),
]  # fmt: skip


@pytest.mark.parametrize(("given", "said", "argv", "flagged"), FIELD_VS_FLAG)
def test_config_errors_name_fields_and_the_cli_says_its_flags(
    given, said, argv, flagged, tmp_path, capsys
) -> None:
    from attnkit.cli import main

    kwargs = {"out": str(tmp_path / "run"), **given}
    with pytest.raises(ValueError) as err:
        FitConfig(DataConfig(**kwargs.pop("data", {"task": "copy"})),
                  train=TrainConfig(**kwargs.pop("train", {})), **kwargs)  # fmt: skip
    assert str(err.value).startswith(said) and "--" not in str(err.value)
    argv = ["train", *argv] if "--out" in argv else ["train", *argv, "--out", str(tmp_path / "r")]
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith(f"attnkit train: error: {flagged}")
    assert not (tmp_path / "r").exists()


def test_a_field_error_survives_pickling_and_names_only_flags_the_command_has() -> None:
    import pickle

    from attnkit.train.config import FieldError

    with pytest.raises(FieldError) as err:
        TrainConfig(epochs=0)
    again = pickle.loads(pickle.dumps(err.value))
    assert str(again) == str(err.value) == "epochs=0, batch_size=64; both must be >= 1"
    flags = {"epochs": "--epochs"}  # a command with --epochs only
    assert again.say(flags.get) == "--epochs 0, batch_size=64; both must be >= 1"


def test_the_lm_options_name_fields_and_the_cli_says_flags(tmp_path, capsys) -> None:
    from attnkit.cli import main

    text = tmp_path / "t.txt"
    text.write_text("abc" * 50)
    with pytest.raises(ValueError, match=r"^train_text go\(es\) with task lm"):
        DataConfig(task="toy-ko", train_text=str(text))
    with pytest.raises(ValueError, match=r"^train_size sizes the generated text; with train_text"):
        DataConfig(task="lm", train_text=str(text), train_size=9)
    argv = ["train", "--task", "lm", "--train-text", str(text), "--train-size", "9", "--out",
            str(tmp_path / "r")]  # fmt: skip
    assert main(argv) == 2
    assert "error: --train-size sizes the generated text; with --train-text the file is the data " \
           "(its last 5% held out, or --valid-text)" in capsys.readouterr().err
