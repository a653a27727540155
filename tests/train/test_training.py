"""Training lowers the loss, and a trained checkpoint translates through the CLI."""

import json

import pytest
import torch

from attnkit.cli import main
from attnkit.data.tasks import load_task
from attnkit.data.vocab import Vocab
from attnkit.models import build_model
from attnkit.train.loop import TrainConfig, train

pytestmark = pytest.mark.usefixtures("one_thread_module")


TINY = ["--train-size", "300", "--valid-size", "30", "--test-size", "30", "--preset", "tiny"]


def test_loss_falls(tmp_path) -> None:
    sp = load_task("toy-ko", seed=0, train_size=300, valid_size=30, test_size=30)
    sv, tv = Vocab.build(e.src for e in sp.train), Vocab.build(e.tgt for e in sp.train)
    torch.manual_seed(0)
    model = build_model("rnnsearch", src_vocab=len(sv), tgt_vocab=len(tv), preset="tiny")
    cfg = TrainConfig(epochs=4, batch_size=16, lr=1e-2, progress=False, patience=0)
    result = train(
        model, "rnnsearch", sp.train, sp.valid, sv, tv, cfg, tmp_path, log=lambda s: None
    )
    losses = [row["valid_loss"] for row in result.history]
    assert losses == sorted(losses, reverse=True) and losses[-1] < 0.75 * losses[0], losses
    assert (tmp_path / "best" / "model.safetensors").is_file()
    assert len(json.loads((tmp_path / "history.json").read_text())) == 4


def test_cli_train_translate_evaluate(tmp_path, capsys) -> None:
    out = str(tmp_path / "run")
    args = [
        "train",
        "--task",
        "toy-ko",
        *TINY,
        "--epochs",
        "2",
        "--lr",
        "1e-2",
        "--batch-size",
        "16",
        "--out",
        out,
    ]
    assert main([*args, "--no-progress"]) == 0
    capsys.readouterr()
    png = tmp_path / "att.png"
    assert (
        main(["translate", "--checkpoint", out, "I am a student", "--save-attention", str(png)])
        == 0
    )
    text = capsys.readouterr().out.strip()
    assert text and all("<" not in t for t in text.split())  # some tokens, no specials
    assert png.is_file() and png.stat().st_size > 1000
    assert main(["translate", "--checkpoint", out, "--beam", "3", "we eat bread"]) == 0
    assert capsys.readouterr().out.strip()
    assert main(["evaluate", "--checkpoint", out, "--json"]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert scores["n"] == 30 and 0 <= scores["bleu"] <= 100 and scores["by_length"]


def test_cli_errors_are_clean(tmp_path, capsys) -> None:
    assert main(["translate", "--checkpoint", str(tmp_path), "hi"]) == 2
    assert "attnkit train" in capsys.readouterr().err
    assert main(["train", "--task", "nope", "--out", str(tmp_path)]) == 2
    assert "toy-ko" in capsys.readouterr().err


@pytest.mark.parametrize(
    "model", [["luong", "--align", "local-p", "--window", "2"], ["transformer"], ["rnnencdec"]]
)
def test_cli_other_models_train_and_translate(tmp_path, capsys, model) -> None:
    out = str(tmp_path / "run")
    assert (
        main(
            [
                "train",
                "--task",
                "toy-ko",
                *TINY,
                "--epochs",
                "1",
                "--model",
                *model,
                "--out",
                out,
                "--no-progress",
            ]
        )
        == 0
    )
    assert main(["translate", "--checkpoint", out, "--beam", "2", "I am a student"]) == 0
    assert capsys.readouterr().out.strip()


def test_model_flags_must_fit_the_model(tmp_path, capsys) -> None:
    assert (
        main(
            [
                "train",
                "--task",
                "toy-ko",
                "--model",
                "rnnsearch",
                "--score",
                "dot",
                "--out",
                str(tmp_path),
            ]
        )
        == 2
    )
    assert "--score do(es) not apply to --model rnnsearch" in capsys.readouterr().err


def test_translate_warns_about_unknown_words(tmp_path, capsys) -> None:
    out = str(tmp_path / "run")
    assert (
        main(["train", "--task", "toy-ko", *TINY, "--epochs", "1", "--out", out, "--no-progress"])
        == 0
    )
    capsys.readouterr()
    assert main(["translate", "--checkpoint", out, "I am a dragon"]) == 0
    assert "dragon" in capsys.readouterr().err


def test_cli_corpus_files_train_and_evaluate(tmp_path, capsys) -> None:
    sp = load_task("toy-ko", seed=0, train_size=200, valid_size=0, test_size=0)
    lines = [f"{' '.join(e.src)}\t{' '.join(e.tgt)}\tCC-BY" for e in sp.train]
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("\n".join([*lines[:50], "a line without a tab", *lines[50:]]), "utf-8")
    out = str(tmp_path / "run")
    args = ["train", "--train-tsv", str(tsv), "--preset", "tiny", "--epochs", "1"]
    assert main([*args, "--out", out, "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "200 pairs kept of 201 lines" in err and "line 51" in err
    assert main(["evaluate", "--checkpoint", out, "--train-tsv", str(tsv), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n"] == 10  # the 5% held-out test split
    assert main([*args, "--strict", "--out", str(tmp_path / "strict")]) == 2
    assert "pairs.tsv:51: no tab" in capsys.readouterr().err


def test_cli_subwords_with_held_out_files(tmp_path, capsys) -> None:
    """--tokenise spm with Multi30K-style train/valid/test files: translate prints
    detokenised text and evaluate scores the whole test file with sacreBLEU."""
    sp = load_task("toy-ko", seed=0, train_size=300, valid_size=20, test_size=12)
    files = {}
    for split in ("train", "valid", "test"):
        for side in ("src", "tgt"):
            path = tmp_path / f"{split}.{side}"
            path.write_text(
                "\n".join(" ".join(getattr(e, side)) for e in sp.get(split)) + "\n", "utf-8"
            )
            files[f"--{split}-{side}"] = str(path)
    out = str(tmp_path / "run")
    args = ["train", *[x for kv in files.items() for x in kv], "--tokenise", "spm"]
    args += ["--spm-vocab", "200", "--preset", "tiny", "--model", "transformer"]
    args += ["--epochs", "1", "--warmup", "10", "--label-smoothing", "0.1", "--valid-decode", "0"]
    assert main([*args, "--out", out, "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["translate", "--checkpoint", out, "I am a student"]) == 0
    printed = capsys.readouterr().out
    assert printed.strip() and "\u2581" not in printed
    assert main(["evaluate", "--checkpoint", out, *[x for kv in files.items() for x in kv]]) == 0
    text = capsys.readouterr().out
    assert "test: 12 sentences" in text and "sacreBLEU" in text
