"""``attnkit experiment inductive-bias``: patching and upsampling against hand loops, the
nested class-balanced subsets, the canvas task by construction, both models' parameter counts
by hand and their balance, the class-token map against an attention computed here, the
CNN's mean pooling, the checks and verdict on hand-made numbers (clean, contrary, ceiling,
floor, straddling; floor and ceiling per compared arm and fraction), the --quick run, and
bad settings."""

import math

import numpy as np
import pytest
import torch
from _refusals import refused

from attnkit.data.digits import digit_images
from attnkit.experiments import evidence as ev
from attnkit.experiments.inductive_bias import (
    QUICK,
    InductiveConfig,
    Job,
    catch_up,
    checks_of,
    shown_examples,
    slope,
    train_batch,
    train_one,
    training_subset,
)
from attnkit.experiments.inductive_bias.data import (
    balanced_order,
    held_out_pools,
    load_task,
    patchify,
    subset_size,
    unpatchify,
    upsample,
)
from attnkit.experiments.inductive_bias.models import (
    PatchAttention,
    SmallCNN,
    build,
    mass_on_cell,
    parameters,
)

pytestmark = pytest.mark.usefixtures("one_thread_module")


@pytest.mark.parametrize("patch", [1, 2, 4, 8])
def test_patchify_is_the_hand_loop_and_unpatchify_undoes_it(patch: int) -> None:
    x = torch.randn(3, 8, 8)
    got = patchify(x, patch)
    g = 8 // patch
    assert got.shape == (3, g * g, patch * patch)
    for r in range(g):
        for c in range(g):
            want = x[:, r * patch : (r + 1) * patch, c * patch : (c + 1) * patch].reshape(3, -1)
            assert torch.equal(got[:, r * g + c], want)
    assert torch.equal(unpatchify(got, patch), x)
    with pytest.raises(ValueError, match="does not divide into 3x3 patches"):
        patchify(x, 3)


def test_upsample_is_a_kronecker_product() -> None:
    maps = torch.rand(2, 3, 3)
    up = upsample(maps, 4)
    assert up.shape == (2, 12, 12)
    for b in range(2):
        assert np.array_equal(up[b].numpy(), np.kron(maps[b].numpy(), np.ones((4, 4))))
    assert torch.allclose(up.sum(dim=(1, 2)), 16 * maps.sum(dim=(1, 2)))


def test_subsets_are_nested_class_balanced_and_seeded() -> None:
    labels = torch.tensor([0] * 7 + [1] * 3 + [2] * 5)
    order = balanced_order(labels, seed=0)
    assert sorted(order) == list(range(15))
    for n in range(3, 16):  # every prefix of >= 3 images holds each class...
        got = [int(labels[i]) for i in order[:n]]
        assert set(got) == {0, 1, 2}
        counts = [got.count(c) for c in range(3)]
        left = [sum(labels.tolist()[i] == c for i in order[n:]) for c in range(3)]
        # ...and the counts of the classes that still have images left differ by at most one
        open_counts = [k for k, r in zip(counts, left, strict=True) if r > 0]
        assert not open_counts or max(open_counts) - min(open_counts) <= 1
    assert balanced_order(labels, seed=1) != order
    assert balanced_order(labels, seed=0) == order


def test_subset_sizes_and_real_subsets() -> None:
    assert [subset_size(1258, f) for f in (0.01, 0.05, 0.1, 1.0)] == [13, 63, 126, 1258]
    assert subset_size(100, 0.01) == 10  # at least one image per class
    for bad in (0.0, 1.5, -0.1):
        with pytest.raises(ValueError, match=r"in \(0, 1\]"):
            subset_size(100, bad)
    task = load_task("digits", 0)
    subsets = [training_subset(task, f, 3).tolist() for f in (0.01, 0.05, 0.25, 1.0)]
    for small, big in zip(subsets, subsets[1:], strict=False):
        assert big[: len(small)] == small  # nested
    assert set(task.train_y[subsets[0]].tolist()) == set(range(10))  # 13 images, 10 classes
    assert sorted(subsets[-1]) == list(range(len(task.train_y)))


def test_digits_task_splits_images() -> None:
    train, test = held_out_pools(0)
    assert not set(train) & set(test) and len(train) + len(test) == len(digit_images()[1])
    task = load_task("digits", 0)
    images, labels = digit_images()
    assert np.array_equal(task.test_x.numpy(), images[test])
    assert task.train_y.tolist() == labels[train].tolist()
    assert task.test_image.tolist() == test and task.test_cell is None
    assert shown_examples(task, 3).tolist() == [0, 1, 2]


def test_canvas_task_by_construction() -> None:
    """Each canvas holds its digit's image in exactly one 8x8 cell and nothing elsewhere;
    every held-out image appears in the requested number of distinct cells."""
    images, labels = digit_images()
    train, test = held_out_pools(0)
    task = load_task("canvas", 0)
    assert task.train_x.shape == (len(train), 24, 24) and task.test_cell is not None
    assert task.test_x.shape[0] == 9 * len(test)
    for x, y, i in [(task.train_x[k], task.train_y[k], train[k]) for k in range(0, 1258, 97)]:
        cells = x.reshape(3, 8, 3, 8).permute(0, 2, 1, 3).reshape(9, 8, 8)  # (9, 8, 8)
        full = [c for c in range(9) if cells[c].abs().sum() > 0]
        assert len(full) == 1 and np.array_equal(cells[full[0]].numpy(), images[i])
        assert int(y) == labels[i]
    for k in (0, 1, 8, 9, 100, len(task.test_y) - 1):
        i, c = test[k // 9], int(task.test_cell[k])
        assert c == k % 9  # all nine cells, in order
        r, col = divmod(c, 3)
        assert np.array_equal(task.test_x[k, 8 * r : 8 * r + 8, 8 * col : 8 * col + 8].numpy(),
                              images[i])  # fmt: skip
        assert float(task.test_x[k].abs().sum()) == pytest.approx(float(images[i].sum()))
    few = load_task("canvas", 0, 2)
    assert few.test_cell is not None and len(few.test_y) == 2 * len(test)
    pairs = few.test_cell.reshape(-1, 2)
    assert bool((pairs[:, 0] != pairs[:, 1]).all())
    assert task.test_image.tolist() == [i for i in test for _ in range(9)]
    shown = shown_examples(task, 5)
    assert task.test_cell[shown].tolist() == [0, 1, 2, 3, 4]
    assert task.test_image[shown].tolist() == test[:5]  # five different images
    shown = shown_examples(few, 12)
    assert few.test_cell[shown].tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 2]
    assert len(set(few.test_image[shown].tolist())) == 12


def test_batches_are_pure_functions_of_seed_and_step() -> None:
    task = load_task("digits", 0)
    subset = training_subset(task, 0.05, 0)
    x, y = train_batch(task, subset, 32, 0, 5)
    x2, y2 = train_batch(task, subset, 32, 0, 5)
    assert torch.equal(x, x2) and torch.equal(y, y2)
    assert not torch.equal(train_batch(task, subset, 32, 0, 6)[0], x)
    allowed = {tuple(task.train_x[i].flatten().tolist()) for i in subset.tolist()}
    assert all(tuple(img.flatten().tolist()) in allowed for img in x)


def test_cnn_parameter_count_by_hand() -> None:
    """conv 9c + conv 9·c·2c + conv 9·2c·2c (no biases) + head 2c·10 + 10."""
    for c in (1, 5, 18):
        assert parameters(SmallCNN(c)) == 9 * c + 18 * c * c + 36 * c * c + 20 * c + 10


def test_attention_parameter_count_by_hand() -> None:
    """patch embedding P²D + D, class token D, positions (n+1)D, per layer 4(D² + D)
    attention + (2D² + 2D) + (2D² + D) FFN + two LayerNorms 4D, final LayerNorm 2D,
    head 10D + 10."""
    d, p, n, layers = 32, 2, 16, 2
    layer = 4 * (d * d + d) + (2 * d * d + 2 * d) + (2 * d * d + d) + 4 * d
    want = p * p * d + d + d + (n + 1) * d + layers * layer + 2 * d + 10 * d + 10
    assert parameters(PatchAttention(8, p, d, 2, layers)) == want


@pytest.mark.parametrize(("side", "patch"), [(8, 2), (24, 4), (8, 4)])
def test_parameter_counts_are_balanced(side: int, patch: int) -> None:
    counts = {m: parameters(build(m, side, patch, 32, 2, 2)) for m in ("cnn", "attention")}
    assert abs(counts["cnn"] / counts["attention"] - 1) <= 0.25, counts
    assert abs(counts["cnn"] / counts["attention"] - 1) <= 0.05, counts  # the closest width


def test_build_does_not_consume_the_random_state() -> None:
    torch.manual_seed(0)
    a = build("cnn", 8, 2, 32, 2, 2)
    torch.manual_seed(0)
    b = SmallCNN(a.conv1.out_channels)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))


def test_class_attention_against_a_hand_computed_last_layer() -> None:
    torch.manual_seed(0)
    model = PatchAttention(8, 2, 8, 2, 2)
    x = torch.rand(3, 8, 8)
    got = model.class_attention(x)
    assert got.shape == (3, 4, 4)
    assert torch.allclose(got.sum(dim=(1, 2)), torch.ones(3))
    # the last layer's input, then softmax(q kᵀ / √d_h) per head, computed here
    z = torch.cat([model.cls.expand(3, -1, -1), model.embed(patchify(x, 2))], 1) + model.pos
    with torch.no_grad():
        z, _ = model.layers[0](z, model.mask)
        last = model.layers[1]
        h = last.res1.norm(z)  # (B, n+1, D)
        q = last.attn.q_proj(h).reshape(3, 17, 2, 4).transpose(1, 2)  # (B, H, n+1, Dh)
        k = last.attn.k_proj(h).reshape(3, 17, 2, 4).transpose(1, 2)
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(4), dim=-1).mean(dim=1)
    want = w[:, 0, 1:] / w[:, 0, 1:].sum(-1, keepdim=True)  # (B, n)
    assert torch.allclose(got.reshape(3, 16), want, atol=1e-6)


def test_mass_on_cell_by_hand() -> None:
    maps = torch.zeros(2, 6, 6)
    maps[0, 0:2, 4:6] = 0.1  # cell (0, 2): 0.4
    maps[0, 2, 2] = 0.6  # cell (1, 1)
    maps[1] = 1 / 36
    got = mass_on_cell(maps, torch.tensor([2, 4]), 3)
    assert torch.allclose(got, torch.tensor([0.4, 4 / 36]))
    with pytest.raises(ValueError, match="does not cut into 4x4"):
        mass_on_cell(maps, torch.tensor([0, 0]), 4)


def test_an_attention_run_reports_its_maps() -> None:
    cfg = InductiveConfig(**QUICK)  # type: ignore[arg-type]
    out = train_one(cfg, Job("canvas", "attention", 1.0, cfg.seed))
    assert 0 <= out["accuracy"] <= 1 and 0 < out["attention_on_digit_cell"] <= 1
    maps = out["maps"]
    assert np.asarray(maps["maps"]).shape == (2, 6, 6)
    assert np.asarray(maps["images"]).shape == (2, 24, 24)


FRACTIONS = [0.05, 0.1, 0.25, 0.5, 1.0]  # the default


def _acc(cnn: list[float], attention: list[float], noise: float = 0.01) -> dict:
    """acc[model][fraction][seed] for five seeds: each curve ± noise (seed-dependent, and in
    opposite directions for the two models so that the gaps vary over seeds)."""
    wiggle = [-2, -1, 0, 1, 2]
    return {
        "cnn": [[min(1.0, a + noise * w) for w in wiggle] for a in cnn],
        "attention": [[min(1.0, a - noise * w) for w in wiggle] for a in attention],
    }


def _named(checks) -> dict[str, str]:
    return {c.name: c.outcome for c in checks}


def test_a_clean_result_reproduces() -> None:
    """The CNN leads at <= 10% and its lead shrinks with data, on both tasks."""
    acc = {
        "digits": _acc([0.8, 0.9, 0.95, 0.96, 0.97], [0.6, 0.8, 0.90, 0.95, 0.97]),
        "canvas": _acc([0.7, 0.85, 0.9, 0.95, 0.96], [0.5, 0.6, 0.8, 0.9, 0.97]),
    }
    checks = checks_of(FRACTIONS, acc)
    assert all(c.outcome == ev.PASS for c in checks), [c.reason for c in checks]
    lead = next(c for c in checks if c.name == "digits: CNN lead at <= 10% of the data")
    assert lead.value == pytest.approx((0.2 + 0.1) / 2)
    assert {c.kind for c in checks} == {"claim", "design"} and len(checks) == 10
    assert ev.verdict_of(checks) == ev.REPRODUCED


def test_slope_is_least_squares() -> None:
    assert slope([0.0, 1.0, 2.0], [1.0, 3.0, 5.0]) == pytest.approx(2.0)
    assert slope([0.0, 1.0, 2.0, 3.0], [1.0, 0.0, 1.0, 0.0]) == pytest.approx(-0.2)


def test_a_clean_contrary_result_is_not_reproduced() -> None:
    """Attention ahead at small data and the gap growing with data: both claims fail."""
    acc = {"digits": _acc([0.5, 0.6, 0.8, 0.9, 0.95], [0.7, 0.8, 0.85, 0.9, 0.9])}
    checks = checks_of(FRACTIONS, acc)
    got = _named(checks)
    assert got["digits: CNN lead at <= 10% of the data"] == ev.FAIL
    assert got["digits: slope of the CNN lead per decade of data"] == ev.FAIL
    verdict = ev.verdict_of(checks)
    assert verdict.startswith("NOT REPRODUCED: digits: CNN lead") and ev.exit_code(verdict) == 1


def test_a_ceiling_a_floor_or_a_straddling_gap_is_inconclusive() -> None:
    """Both arms at 100% (or at chance) at small data: INCONCLUSIVE even though the lead
    "fails"; a lead whose interval holds 0: INCONCLUSIVE."""
    top = _acc([1.0] * 5, [0.995] * 2 + [1.0] * 3, noise=0.0)
    verdict = ev.verdict_of(checks_of(FRACTIONS, {"digits": top}))
    assert verdict.startswith("INCONCLUSIVE: digits: cells at the ceiling (each arm, each "
                              "fraction): 10 of 10 cells within 0.02 of 1")  # fmt: skip
    chance = _acc([0.1, 0.11, 0.5, 0.9, 0.95], [0.1, 0.1, 0.4, 0.8, 0.9])
    verdict = ev.verdict_of(checks_of(FRACTIONS, {"canvas": chance}))
    assert verdict.startswith("INCONCLUSIVE: canvas: cells at the floor") and \
        "4 of 10 cells within" in verdict  # fmt: skip
    wide = _acc([0.8, 0.9, 0.95, 0.96, 0.97], [0.8, 0.9, 0.9, 0.9, 0.9], noise=0.1)
    checks = checks_of(FRACTIONS, {"digits": wide})
    lead = next(c for c in checks if c.name == "digits: CNN lead at <= 10% of the data")
    assert lead.outcome == ev.INCONCLUSIVE and lead.ci[0] < 0 < lead.ci[1]
    assert ev.exit_code(ev.verdict_of(checks)) == 2


def test_floor_and_ceiling_are_judged_per_arm_and_per_fraction() -> None:
    """One compared cell at chance (attention at 5% on the canvas) makes the verdict
    INCONCLUSIVE although every average over arms or fractions is far from chance; a model
    that is not compared (here at chance everywhere) never withholds the verdict; one cell at
    the ceiling (the CNN at 100%) does, alone."""
    clean = _acc([0.7, 0.85, 0.9, 0.95, 0.96], [0.5, 0.6, 0.8, 0.9, 0.97])
    context = {**clean, "context": [[0.1] * 5 for _ in FRACTIONS]}
    assert ev.verdict_of(checks_of(FRACTIONS, {"canvas": context})) == ev.REPRODUCED
    one_low = _acc([0.7, 0.85, 0.9, 0.95, 0.96], [0.11, 0.6, 0.8, 0.9, 0.97], noise=0.0)
    verdict = ev.verdict_of(checks_of(FRACTIONS, {"canvas": one_low}))
    assert verdict == ("INCONCLUSIVE: canvas: cells at the floor (each arm, each fraction): 1 of "
                       "10 cells within 0.02 of 0.1; the closest 0.110: attention at 5% (0.110), "
                       "where no gap can show")  # fmt: skip
    one_high = _acc([0.7, 0.85, 0.9, 0.95, 0.985], [0.5, 0.6, 0.8, 0.9, 0.97], noise=0.0)
    verdict = ev.verdict_of(checks_of(FRACTIONS, {"canvas": one_high}))
    assert verdict.startswith("INCONCLUSIVE: canvas: cells at the ceiling") and \
        "cnn at 100% (0.985)" in verdict  # fmt: skip


def test_the_quick_run_writes_its_checks(tmp_path) -> None:
    from attnkit.experiments.inductive_bias import run_experiment

    result = run_experiment(InductiveConfig(**QUICK), tmp_path, say=lambda _: None)  # type: ignore[arg-type]
    assert [c["name"] for c in result["checks"]][3:5] == [
        "digits: CNN lead at <= 10% of the data",
        "digits: slope of the CNN lead per decade of data"]  # fmt: skip
    assert all(c["ci"][0] <= c["value"] <= c["ci"][1] for c in result["checks"])
    assert ev.exit_code(result["verdict"]) in (0, 1, 2)
    assert len(result["accuracy"]["canvas"]["cnn"][0]) == 2  # two seeds


def test_the_cnn_pools_by_the_mean_over_positions() -> None:
    """The docstring's global average pooling: the head reads the mean of conv3's map."""
    import torch.nn.functional as F

    torch.manual_seed(0)
    m = SmallCNN(3)
    x = torch.rand(2, 8, 8)
    h = F.max_pool2d(F.relu(m.conv1(x[:, None])), 2)
    h = F.relu(m.conv3(F.max_pool2d(F.relu(m.conv2(h)), 2)))  # (B, 6, 2, 2)
    want = m.head(h.sum(dim=(-2, -1)) / 4)
    assert torch.allclose(m(x), want, atol=1e-6)


def test_catch_up_is_where_the_gap_stays_small() -> None:
    f = [0.1, 0.5, 1.0]
    assert catch_up(f, [0.01, 0.0, -0.1]) == 0.1  # attention never behind
    assert catch_up(f, [0.1, 0.01, 0.03]) is None  # dips, then the CNN leads again
    assert catch_up(f, [0.1, 0.03, 0.019]) == 1.0
    assert catch_up(f, [0.01, 0.05, 0.0]) == 1.0  # an early dip does not count


test_bad_settings_fail_clearly = refused(InductiveConfig, [
    ({"fractions": "0,1"}, r"each in \(0, 1\]"),
    ({"fractions": "0.5"}, "at least two fractions"),
    ({"fractions": "a,b"}, "comma-separated numbers"),
    ({"tasks": "mnist"}, "name each of"),
    ({"tasks": "digits,digits"}, "at most once"),
    ({"seeds": 0}, "--seeds 0"),
    ({"steps": 0}, "--steps 0"),
    ({"dim": 10, "heads": 4}, "divisible by --heads"),
    ({"patch": 3}, "--patch 3"),
    ({"seeds": 1}, "an interval needs at least 2"),
    ({"fractions": "0.5,1"}, "one <= 0.1 at least"),
    ({"test_cells": 10}, "--test-cells 10"),
    ({"lr": 0.0}, "--lr"),
])
