"""``attnkit experiment heads``: the Jensen–Shannon divergence against hand-computed values, the
verdict on synthetic numbers, the configs, and one tiny model's measures against independent
computations (sacrebleu, attention_aer, cross_attention one sentence at a time)."""

import gzip
import math
from pathlib import Path

import pytest
import torch

from attnkit.data.example import Example
from attnkit.experiments.heads import MARGIN, QUICK, HeadsConfig, verdict
from attnkit.experiments.heads.jobs import fit_config, multi30k_subset, toy_ko_data
from attnkit.experiments.heads.measure import (
    example_index,
    js_divergence,
    mean_pairwise_js,
    measure,
    pairwise_js,
)
from attnkit.experiments.pool import fit_logged

LN2 = math.log(2)


def t(rows: list) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float64)


def _kl(p: list[float], m: list[float]) -> float:
    """KL(P ‖ M) in nats, written out (0 log 0 = 0)."""
    return sum(x * math.log(x / y) for x, y in zip(p, m, strict=True) if x > 0)


def test_js_divergence_hand_computed() -> None:
    # disjoint supports: M = (½, ½), KL(P‖M) = KL(Q‖M) = ln 2
    assert float(js_divergence(t([1, 0]), t([0, 1]))) == pytest.approx(LN2)
    # P = (½, ½), Q = (1, 0): M = (¾, ¼); KL(P‖M) = ½ ln(4/3), KL(Q‖M) = ln(4/3)
    assert float(js_divergence(t([0.5, 0.5]), t([1, 0]))) == pytest.approx(0.75 * math.log(4 / 3))
    assert float(js_divergence(t([1, 0]), t([0.5, 0.5]))) == pytest.approx(0.75 * math.log(4 / 3))
    assert float(js_divergence(t([0.2, 0.3, 0.5]), t([0.2, 0.3, 0.5]))) == 0.0
    # batched over leading dims
    got = js_divergence(t([[1, 0], [0.5, 0.5]]), t([[0, 1], [0.5, 0.5]]))
    assert got.tolist() == pytest.approx([LN2, 0.0])


def test_pairwise_js_averages_head_pairs_per_row() -> None:
    heads = t([[[1, 0]], [[0, 1]], [[2, 0]]])  # (H=3, T=1, S=2); head 2 renormalised to (1, 0)
    # pairs (0,1) ln 2, (0,2) 0, (1,2) ln 2
    assert pairwise_js(heads).tolist() == pytest.approx([2 / 3 * LN2])
    assert math.isnan(float(pairwise_js(t([[[0.3, 0.7]]]))[0]))  # one head: no pair


def test_mean_pairwise_js_counts_every_row_once() -> None:
    a = t([[[1, 0]], [[0, 1]]])  # one row, JS ln 2
    b = t([[[1, 0], [0.5, 0.5]], [[1, 0], [0.5, 0.5]]])  # two rows, JS 0
    assert mean_pairwise_js([a, b]) == pytest.approx(LN2 / 3)


def test_example_index_prefers_links_then_length() -> None:
    ex = [
        Example(["a"] * 9, ["x"], [(0, 0)]),
        Example(["a"] * 3, ["x", "y"], [(0, 0), (1, 1)]),
        Example(["a"] * 5, ["x", "y"], [(0, 0), (1, 1)]),
    ]
    assert example_index(ex) == 2


def test_verdict_pass_and_fail() -> None:
    reasons, checks = verdict({1: [80, 81, 79], 4: [90, 91, 89], 8: [88, 89, 87]})
    assert reasons == [] and checks["best_heads"] == 4
    assert checks["gap"] == pytest.approx(10) and checks["seed_noise"] == pytest.approx(1)
    assert checks["needed_gap"] == pytest.approx(2)  # 2 sigma > the 1.0 margin

    noisy, c = verdict({1: [88, 90], 4: [89, 91]})  # gap 1, noise sqrt(2): need 2.83
    assert c["needed_gap"] == pytest.approx(2 * math.sqrt(2), abs=1e-3)
    assert len(noisy) == 1 and "not more than 2.83" in noisy[0]

    one_best, _ = verdict({1: [95.0], 2: [94.0]})
    assert any("one head is the best" in r for r in one_best)

    single_seed, c = verdict({1: [90.0], 2: [90.5]})  # no noise measured: the margin alone
    assert c["needed_gap"] == MARGIN and math.isnan(c["seed_noise"]) and single_seed

    dead, _ = verdict({1: [1.0], 2: [9.0]})
    assert any("not learnt" in r for r in dead)


def test_bad_settings_fail_clearly() -> None:
    with pytest.raises(ValueError, match="1 and at least one more"):
        HeadsConfig(heads="2,4")
    with pytest.raises(ValueError, match="1 and at least one more"):
        HeadsConfig(heads="1,2,2")
    with pytest.raises(ValueError, match="comma-separated integers"):
        HeadsConfig(heads="1,two")
    with pytest.raises(ValueError, match="divisible by every head count .*\\[16\\]"):
        HeadsConfig(dim=40)
    with pytest.raises(ValueError, match="--seeds"):
        HeadsConfig(seeds=0)
    with pytest.raises(ValueError, match="--multi30k"):
        HeadsConfig(multi30k=-1)


def test_models_differ_only_in_heads(tmp_path: Path) -> None:
    cfg = HeadsConfig(steps=10, batch_size=4)
    data = toy_ko_data(cfg, 0)
    a = fit_config(cfg, 1, 0, data, cfg.steps, tmp_path / "x").to_json()
    b = fit_config(cfg, 16, 0, data, cfg.steps, tmp_path / "x").to_json()
    assert a["model"]["options"].pop("heads") == 1 and b["model"]["options"].pop("heads") == 16
    assert a == b
    assert a["data"]["train_size"] == 40 and a["train"]["epochs"] == 1  # = exactly 10 updates


def test_multi30k_subset(tmp_path: Path) -> None:
    src = tmp_path / "m30k"
    src.mkdir()
    for split in ("train", "val", "test_2016_flickr"):
        for lang in ("en", "de"):
            with gzip.open(src / f"{split}.{lang}.gz", "wt", encoding="utf-8") as f:
                f.writelines(f"{split} {lang} {i}\n" for i in range(10))
    cfg = HeadsConfig(multi30k=2, batch_size=2, valid_size=2, test_size=3)  # 4 training pairs
    folder = multi30k_subset(cfg, tmp_path / "sub", source=src)
    assert (folder / "train.de").read_text().splitlines() == [f"train de {i}" for i in range(4)]
    assert len((folder / "val.en").read_text().splitlines()) == 2
    assert (folder / "test.en").read_text().splitlines()[-1] == "test_2016_flickr en 2"
    with pytest.raises(ValueError, match="10 lines, fewer than the 12 asked for"):
        multi30k_subset(HeadsConfig(multi30k=6, batch_size=2), tmp_path / "s", source=src)
    with pytest.raises(FileNotFoundError, match="not found"):
        multi30k_subset(cfg, tmp_path / "sub2", source=tmp_path / "absent")


def test_measures_of_one_model_match_independent_computations(
    tmp_path: Path, one_thread: None
) -> None:
    """BLEU recomputed with sacrebleu, AER with attention_aer (the model's own forward), the
    heads' weights with cross_attention one sentence at a time (no padding), JS from those."""
    import sacrebleu

    from attnkit.data.batching import batches
    from attnkit.decode import translate
    from attnkit.eval.forced import attention_aer
    from attnkit.train import checkpoint

    cfg = HeadsConfig(**{**QUICK, "heads": "1,2", "steps": 6})
    fit_logged(fit_config(cfg, 2, 0, toy_ko_data(cfg, 0), 6, tmp_path / "m"), tmp_path / "m.log")
    got = measure(tmp_path / "m")

    ck = checkpoint.load(tmp_path / "m" / "last")
    from attnkit.data.tasks import load_task

    test = load_task("toy-ko", seed=0, train_size=48, valid_size=8, test_size=12).test
    hyps = translate(ck.model, test, ck.src_vocab, ck.tgt_vocab).hyps
    bleu = sacrebleu.corpus_bleu(
        [" ".join(h) for h in hyps], [[" ".join(e.tgt) for e in test]], tokenize="none"
    ).score
    assert got["bleu"] == pytest.approx(bleu, abs=0.006)
    aer = attention_aer(ck.model, test, ck.src_vocab, ck.tgt_vocab)
    assert got["aer"] == pytest.approx(100 * aer, abs=0.006)

    js_rows = []
    ck.model.eval()
    with torch.no_grad():
        for e in test:
            (b,) = batches([e], ck.src_vocab, ck.tgt_vocab, 1)
            w = ck.model.cross_attention(b.src, b.src_len, b.tgt_in)[0, -1].double()
            w = w[:, : len(e.tgt), : len(e.src)]  # (H=2, T, S): the words only
            p, q = (w / w.sum(-1, keepdim=True)).unbind(0)  # (T, S) each
            for pt, qt in zip(p.tolist(), q.tolist(), strict=True):
                mt = [(x + y) / 2 for x, y in zip(pt, qt, strict=True)]
                js_rows.append((_kl(pt, mt) + _kl(qt, mt)) / 2)
    assert got["js"] == pytest.approx(sum(js_rows) / len(js_rows), abs=1e-4)
    k = got["example"]["index"]
    assert len(got["example"]["weights"]) == 2  # one map per head
    assert got["example"]["src"] == test[k].src
