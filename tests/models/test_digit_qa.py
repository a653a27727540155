"""The digit-qa model end to end: each co-attention variant trains through ``attnkit.fit``
(the "qa" family), ``attnkit evaluate`` scores it overall and per template, and ``attnkit view
--checkpoint DIR --example N`` writes both maps (PNG and a self-contained page); plus the
model's shapes, masks and config errors, and the structure experiment's rows in quick mode."""

import json

import numpy as np
import pytest
import torch

import attnkit
from attnkit.cli import main
from attnkit.experiments.structure.qa import QASetting, train_qa_arm
from attnkit.models import build_model
from attnkit.models.digit_qa import DigitQAConfig
from attnkit.tasks.qa import accuracies
from attnkit.train.config import DataConfig, FitConfig, ModelConfig, TrainConfig
from attnkit.viz.coattention import upsample

pytestmark = pytest.mark.usefixtures("one_thread_module")


def _fit(out, variant, epochs=1):
    return attnkit.fit(
        FitConfig(
            data=DataConfig(task="digit-qa", train_size=96, valid_size=16, test_size=24),
            model=ModelConfig("digit-qa", preset="tiny", options={"coattention": variant}),
            train=TrainConfig(epochs=epochs, batch_size=32, lr=3e-3, patience=0, progress=False),
            out=out,
        ),
        log=lambda s: None,
    )


@pytest.mark.parametrize("variant", ["parallel", "alternating"])
def test_train_evaluate_and_view_both_maps(variant, tmp_path, capsys):
    result = _fit(tmp_path / "run", variant)
    assert 0.0 <= result.history[-1]["valid_exact"] <= 1.0
    assert main(["evaluate", "--checkpoint", str(tmp_path / "run"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["n"] == 24 and 0.0 <= report["accuracy"] <= 1.0
    assert {"accuracy_left", "accuracy_count", "accuracy_exists"} <= set(report)
    page, png = tmp_path / "qa.html", tmp_path / "qa.png"
    argv = ["view", "--checkpoint", str(tmp_path / "run"), "--example", "2",
            "--out", str(page), "--png", str(png)]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "example 2" in printed and "question weights" in printed
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = page.read_text()
    assert "Content-Security-Policy" in text and "http" not in text.replace("http-equiv", "")
    assert "question words" in text and "image patches" in text


def test_the_none_variant_trains_and_says_it_has_no_maps(tmp_path, capsys):
    result = _fit(tmp_path / "run", "none", epochs=3)
    losses = [row["valid_loss"] for row in result.history]
    assert losses[-1] < losses[0]  # the qa family's loss trains the model
    assert main(["evaluate", "--checkpoint", str(tmp_path / "run")]) == 0
    assert main(["view", "--checkpoint", str(tmp_path / "run"), "--example", "0"]) == 2
    assert "no attention to show" in capsys.readouterr().err


def test_padding_words_change_nothing_and_get_zero_weight():
    torch.manual_seed(0)
    model = build_model("digit-qa", src_vocab=12, tgt_vocab=5, preset="tiny").eval()
    image = torch.rand(2, 1, 24, 24)
    question = torch.tensor([[4, 5, 6, 0, 0], [7, 8, 9, 10, 11]])
    q_len = torch.tensor([3, 5])
    out = model(image, question, q_len)
    assert out.logits.shape == (2, 5) and out.grid == (6, 6)
    assert out.image_weights.shape == (2, 36) and torch.all(out.question_weights[0, 3:] == 0)
    longer = torch.cat([question, torch.zeros(2, 3, dtype=torch.long)], dim=1)
    torch.testing.assert_close(model(image, longer, q_len).logits, out.logits)


def test_bad_config_values_are_clear_errors():
    with pytest.raises(ValueError, match="coattention='sideways'"):
        DigitQAConfig(10, 5, coattention="sideways")
    with pytest.raises(ValueError, match="dim=15; it must be even"):
        DigitQAConfig(10, 5, dim=15)
    with pytest.raises(ValueError, match="hidden"):
        DigitQAConfig(10, 5, hidden=0)


def test_accuracies_overall_and_per_template():
    class E:
        def __init__(self, template, answer):
            self.template, self.answer = template, answer

    xs = [E("left", "3"), E("left", "4"), E("count", "2"), E("count", "0")]
    got = accuracies(["3", "5", "2", "2"], xs)
    assert got == {"accuracy": 0.5, "accuracy_count": 0.5, "accuracy_left": 0.5}


def test_upsample_spreads_each_patch_over_its_pixels():
    w = np.array([[0.1, 0.2], [0.3, 0.4]])
    big = upsample(w, (4, 6))
    assert big.shape == (4, 6) and big[0, 2] == 0.1 and big[3, 5] == 0.4 and big[1, 3] == 0.2
    with pytest.raises(ValueError, match="whole number"):
        upsample(w, (5, 6))


def test_the_structure_experiments_qa_arm_trains_at_matched_parameters():
    s = QASetting("tiny", (64, 16, 16), 8, 2e-3, 1.0, 2, 1, 1, 1)
    runs = {v: train_qa_arm(v, 0, s) for v in ("parallel", "alternating", "none")}
    for r in runs.values():
        assert 0.0 <= r["test_accuracy"] <= 1.0 and len(r["test_correct"]) == 16
        assert r["steps_run"] <= 2 and r["parameters"] > 0
    ref = runs["parallel"]["parameters"]
    assert all(abs(r["parameters"] - ref) / ref <= 0.05 for r in runs.values())
    assert runs["none"]["widths"] == {"dim": runs["none"]["widths"]["dim"]}  # the baseline widened


def test_multidim_pooling_option_weights_each_feature_and_ignores_padding():
    """coattention="none", pool="multidim": each side pooled by feature-wise attention (Shen
    2018): per feature the weights over the real words sum to one and a padded word gets
    exactly zero, so padding changes nothing."""
    torch.manual_seed(0)
    cfg = DigitQAConfig(src_vocab=12, tgt_vocab=5, dim=16, hidden=16, channels=8,
                        coattention="none", pool="multidim")  # fmt: skip
    model = build_model("digit-qa", cfg).eval()
    image = torch.rand(2, 1, 24, 24)
    question = torch.tensor([[3, 4, 5, 6], [7, 8, 0, 0]])
    q_len = torch.tensor([4, 2])
    q = model.words(question, q_len)[0]  # (B, T, D)
    mask = torch.tensor([[True] * 4, [True, True, False, False]])
    pooled = model.pools[0](q, mask)
    assert pooled.weights is not None and pooled.weights.shape == (2, 4, 16)
    torch.testing.assert_close(pooled.weights.sum(1), torch.ones(2, 16))  # (B, D)
    assert torch.all(pooled.weights[1, 2:] == 0)
    out = model(image, question, q_len)
    assert out.logits.shape == (2, 5) and out.question_weights is not None
    longer = torch.tensor([[3, 4, 5, 6, 0], [7, 8, 0, 0, 0]])
    torch.testing.assert_close(model(image, longer, q_len).logits, out.logits)
    with pytest.raises(ValueError, match="pools the sides of coattention='none'"):
        DigitQAConfig(src_vocab=12, tgt_vocab=5, coattention="parallel", pool="multidim")


def test_a_multidim_model_without_coattention_has_maps_to_show():
    from attnkit.data.tasks import load_task
    from attnkit.data.vocab import Vocab
    from attnkit.tasks.qa import coattention_maps

    data = load_task("digit-qa", seed=0, train_size=8, valid_size=1, test_size=1).train
    src = Vocab.build(e.question for e in data)
    tgt = Vocab.build((e.answer,) for e in data)
    cfg = DigitQAConfig(src_vocab=len(src), tgt_vocab=len(tgt), dim=16, hidden=16, channels=8,
                        coattention="none", pool="multidim")  # fmt: skip
    maps = coattention_maps(build_model("digit-qa", cfg), data[0], src, tgt)
    assert maps.question_weights.shape == (len(data[0].question),)
    assert abs(maps.question_weights.sum() - 1) < 1e-6 and abs(maps.image_weights.sum() - 1) < 1e-6
    mean = DigitQAConfig(src_vocab=len(src), tgt_vocab=len(tgt), dim=16, hidden=16, channels=8,
                         coattention="none")  # fmt: skip
    with pytest.raises(ValueError, match="no attention to show"):
        coattention_maps(build_model("digit-qa", mean), data[0], src, tgt)
