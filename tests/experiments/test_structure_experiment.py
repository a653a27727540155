"""``attnkit experiment structure``: the verdict on synthetic rows (a pass, and each way of
failing, including digit-qa not measured), the per-model means, the docs measure's rows against
an independent parameter count and a tiny run, bad config values."""

import pytest

from attnkit.experiments import structure
from attnkit.experiments.structure import StructureConfig, means, verdict
from attnkit.experiments.structure import docs as structure_docs
from attnkit.experiments.structure.report import csv_rows, summary
from attnkit.models import build_model


def _rows(qa=None, docs=None, peak=0.9):
    qa = {"parallel": 0.80, "alternating": 0.78, "none": 0.70} if qa is None else qa
    docs = docs or {"attention": 0.95, "mean": 0.90, "max": 0.92, "multidim": 0.95,
                    "disan": 0.94}  # fmt: skip
    out = []
    for seed in (0, 1, 2):
        wobble = (seed - 1) * 0.005  # the mean over seeds is the value given
        for m, a in qa.items():
            out.append({"task": "digit-qa", "model": m, "seed": seed, "accuracy": a + wobble,
                        "parameters": 10, "seconds_per_step": 0.01})  # fmt: skip
        for m, a in docs.items():
            has = m not in ("mean", "max")
            out.append({"task": "docs", "model": f"han-{m}", "seed": seed,
                        "accuracy": a + wobble, "parameters": 20, "seconds_per_step": 0.02,
                        "key_peak": peak if has else None})  # fmt: skip
    return out


def test_means_average_over_seeds_and_skip_missing_values():
    rows = _rows()
    acc = means(rows)
    assert acc[("docs", "han-mean")] == pytest.approx(0.90)
    assert acc[("digit-qa", "none")] == pytest.approx(0.70)
    peaks = means(rows, "key_peak")
    assert ("docs", "han-mean") not in peaks and peaks[("docs", "han-attention")] == 0.9


def test_the_verdict_passes_when_every_claim_holds():
    reasons, checks = verdict(_rows())
    assert reasons == []
    assert checks["qa"]["best"] == "parallel" and checks["qa"]["gain"] == pytest.approx(0.10)
    assert checks["han"]["gains"]["max"] == pytest.approx(0.03)
    assert checks["multidim"]["difference"] == pytest.approx(0.0)


@pytest.mark.parametrize(
    "rows,expected",
    [
        (_rows(qa={"parallel": 0.705, "alternating": 0.70, "none": 0.70}),
         "digit-qa: co-attention (parallel) 0.705 vs none 0.700"),
        ([r for r in _rows() if r["task"] == "docs"], "digit-qa not measured"),
        (_rows(docs={"attention": 0.95, "mean": 0.90, "max": 0.945, "multidim": 0.95}),
         "docs: HAN 0.950 vs max pooling 0.945 (gain +0.005 < 0.01)"),
        (_rows(peak=0.3), "peaks on the key sentence in 30.0% of documents (< 50%)"),
        (_rows(docs={"attention": 0.95, "mean": 0.90, "max": 0.92, "multidim": 0.93}),
         "multi-dimensional pooling 0.930 below scalar 0.950 by 0.020"),
        ([r for r in _rows() if r["task"] != "docs"], "docs not measured"),
    ],
)  # fmt: skip
def test_the_verdict_fails_with_the_numbers(rows, expected):
    reasons, _ = verdict(rows)
    assert len(reasons) == 1 and expected in reasons[0], reasons


def test_the_docs_measure_trains_every_variant_for_the_same_updates():
    seen = []
    rows = structure_docs.measure([5], 2, True, seen.append)
    assert [r["model"] for r in rows] == list(structure_docs.VARIANTS)
    s = structure_docs.QUICK_SETTINGS
    for r in rows:
        assert r["task"] == "docs" and r["seed"] == 5 and 0 <= r["accuracy"] <= 1
        opts = structure_docs.VARIANTS[r["model"]]
        fresh = build_model("han", src_vocab=len(_vocab(5, 2)), tgt_vocab=6, emb=s["emb"],
                            hidden=s["hidden"], attn=s["attn"], **opts)  # fmt: skip
        assert r["parameters"] == sum(p.numel() for p in fresh.parameters())
        assert (r["key_peak"] is None) == (opts["pool"] in ("mean", "max"))
    assert len(seen) == len(rows)
    table = summary({"rows": rows})
    assert len(table) == len(rows) and len(csv_rows({"rows": rows})[0]) == 7


def _vocab(seed, steps):
    from attnkit.train.config import DataConfig
    from attnkit.train.fit import prepare

    s = structure_docs.QUICK_SETTINGS
    data = DataConfig(task="docs", task_seed=seed, train_size=steps * s["batch"],
                      valid_size=s["valid"], test_size=s["test"])  # fmt: skip
    return prepare(data).src_vocab


def test_the_qa_measure_is_optional():
    found = structure.measures()
    assert found["docs"] is structure_docs.measure and "digit-qa" in found


@pytest.mark.parametrize(
    "bad,match",
    [({"steps": 0}, "--steps 0"), ({"qa_steps": 0}, "--qa-steps 0"), ({"seeds": 0}, "--seeds 0"),
     ({"tiny": 2}, "--tiny 2"), ({"seed": -1}, "--seed -1")],
)  # fmt: skip
def test_bad_config_values_fail_clearly(bad, match):
    with pytest.raises(ValueError, match=match):
        StructureConfig(**bad)
