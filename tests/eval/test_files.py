"""``attnkit evaluate --src FILE --ref FILE``: any test set, scored as sacreBLEU scores it."""

from __future__ import annotations

import gzip
import json

import pytest
import sacrebleu

from attnkit.cli import main
from attnkit.eval.files import sacre_scores

TINY = ["--task", "toy-ko", "--train-size", "300", "--valid-size", "20", "--test-size", "20",
        "--model", "rnnsearch", "--emb", "16", "--enc-hidden", "16", "--dec-hidden", "16",
        "--maxout", "16", "--attn-hidden", "16", "--epochs", "2", "--no-progress",
        "--batch-size", "32", "--seed", "0"]  # fmt: skip


def test_scores_equal_sacrebleus_own_and_the_length_ratio_is_counted_by_hand():
    hyps = ["the cat sat on the mat", "a dog"]
    refs = [["the cat sat on the mat", "a big dog barked"]]
    s = sacre_scores(hyps, refs, "13a")
    assert s.bleu == pytest.approx(sacrebleu.corpus_bleu(hyps, refs).score)
    assert s.chrf == pytest.approx(sacrebleu.corpus_chrf(hyps, refs).score)
    assert s.length_ratio == pytest.approx((6 + 2) / (6 + 4))  # hypothesis / reference words
    assert "tok:13a" in s.bleu_signature and s.bleu_signature.startswith("nrefs:1")
    two = sacre_scores(hyps, [*refs, ["the cat sat on a mat", "a dog"]], "13a")
    assert two.bleu > s.bleu and "nrefs:2" in two.bleu_signature


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("files") / "run"
    assert main(["train", *TINY, "--out", str(out)]) == 0
    return out


def test_evaluate_on_a_file_pair_scores_what_translate_prints(run, tmp_path, capsys):
    sentences = ["I am a student", "the cat sees the dog", "", "we go to school"]
    src = tmp_path / "test.en"
    src.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    refs = ["나는 학생 이다", "고양이 는 개 를 본다", "", "우리 는 학교 에 간다"]
    ref = tmp_path / "test.ko.gz"
    with gzip.open(ref, "wt", encoding="utf-8") as f:
        f.write("\n".join(refs) + "\n")
    hyps_file = tmp_path / "hyps.txt"
    argv = ["evaluate", "--checkpoint", str(run), "--src", str(src), "--ref", str(ref),
            "--hyps", str(hyps_file), "--json"]  # fmt: skip
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    hyps = hyps_file.read_text(encoding="utf-8").splitlines()
    assert len(hyps) == 4 and hyps[2] == ""  # an empty source line gives an empty hypothesis
    nonempty = [s for s in sentences if s]
    assert main(["translate", "--checkpoint", str(run), *nonempty]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed == [hyps[0], hyps[1], hyps[3]]  # the same translations as translate
    assert report["n"] == 4
    assert report["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score)
    assert report["chrf"] == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score)


def test_files_of_different_lengths_are_one_clear_line(run, tmp_path, capsys):
    src = tmp_path / "a.txt"
    src.write_text("I am a student\nwe go\n", encoding="utf-8")
    ref = tmp_path / "b.txt"
    ref.write_text("나는 학생 이다\n", encoding="utf-8")
    assert main(["evaluate", "--checkpoint", str(run), "--src", str(src), "--ref", str(ref)]) == 2
    err = capsys.readouterr().err.strip()
    assert "has 1 lines but" in err and "line i of every reference" in err
    assert len(err.splitlines()) == 1
    assert main(["evaluate", "--checkpoint", str(run), "--src", str(src)]) == 2
    assert "--src FILE and --ref FILE go together" in capsys.readouterr().err
    argv = ["evaluate", "--checkpoint", str(run), "--src", str(src), "--ref", str(src),
            "--task", "toy-ko"]  # fmt: skip
    assert main(argv) == 2
    assert "--task" in capsys.readouterr().err


def test_a_source_line_over_the_input_limit_is_one_clear_line_naming_it(run, tmp_path, capsys):
    src = tmp_path / "a.txt"
    src.write_text("I am a student\nwe go to school\n", encoding="utf-8")
    ref = tmp_path / "b.txt"
    ref.write_text("나는 학생 이다\n우리 는 학교 에 간다\n", encoding="utf-8")
    argv = ["evaluate", "--checkpoint", str(run), "--src", str(src), "--ref", str(ref),
            "--max-input-len", "3"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert f"{src}:1 has 4 tokens, over --max-input-len 3" in err and len(err.splitlines()) == 1
