"""``attnkit experiment distance``: the recall task's answers by construction, the four models'
budgets and reach, the gradient probe against hand-computed and per-example gradients, the
verdict on synthetic numbers, and bad settings."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from attnkit.experiments.distance import (
    QUICK,
    DistanceConfig,
    eval_batch,
    gradient_by_delta,
    train_batch,
    verdict,
)
from attnkit.experiments.distance.data import recall_batch, vocab_size
from attnkit.experiments.pool import generator
from attnkit.models.sequence_classifiers import (
    MODELS,
    SequenceClassifier,
    Sizes,
    budget_widths,
    build,
    closest_width,
    conv_layers,
    input_gradient_norms,
    parameters,
)

pytestmark = pytest.mark.usefixtures("one_thread_module")


def test_the_answer_is_the_marked_symbol_delta_back() -> None:
    k, t = 5, 12
    deltas = torch.tensor([1, 3, 7, 11, 11, 2])
    tokens, labels = recall_batch(deltas, t, k, generator(0))
    assert tokens.shape == (6, t) and labels.shape == (6,)
    for row, d, y in zip(tokens.tolist(), deltas.tolist(), labels.tolist(), strict=True):
        assert row[-1] == 2 * k  # the query ends every sequence
        marked = [i for i, tok in enumerate(row) if k <= tok < 2 * k]
        assert marked == [t - 1 - d]  # exactly one marked token, Δ back
        assert row[t - 1 - d] - k == y  # and it is the answer
        assert all(0 <= tok < k for i, tok in enumerate(row[:-1]) if i != t - 1 - d)
    assert vocab_size(k) == 2 * k + 1


def test_distractors_say_nothing_about_the_answer() -> None:
    """Over many sequences, the plain symbols are as frequent under every label (the marked
    token is the only carrier): each label's distractor histogram is near uniform."""
    k, t, n = 4, 30, 4000
    tokens, labels = recall_batch(torch.full((n,), 10), t, k, generator(1))
    plain = torch.cat([tokens[:, : t - 11], tokens[:, t - 10 : -1]], dim=1)  # (n, t-2)
    for y in range(k):
        freq = torch.bincount(plain[labels == y].flatten(), minlength=k).float()
        assert torch.allclose(freq / freq.sum(), torch.full((k,), 1 / k), atol=0.01)


def test_batches_are_pure_functions_of_their_key() -> None:
    cfg = DistanceConfig(**QUICK)
    a, b = train_batch(cfg, 3), train_batch(cfg, 3)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(train_batch(cfg, 4)[0], a[0])
    t = cfg.sizes.length
    for mix, allowed in (("grid", set(cfg.grid)), ("range", set(range(1, t)))):
        c = DistanceConfig(**{**QUICK, "mix": mix, "batch_size": 400})
        x, y = train_batch(c, 0)
        marked = (x >= c.symbols) & (x < 2 * c.symbols)  # (B, T)
        deltas = {t - 1 - int(i) for i in marked.float().argmax(dim=1)}
        assert deltas == allowed, mix  # 400 draws cover every allowed Δ
    x, y = eval_batch(cfg, 4)
    assert x.shape == (cfg.eval_size, cfg.sizes.length)
    assert torch.equal(x[:, cfg.sizes.length - 1 - 4] - cfg.symbols, y)


def test_recall_batch_refuses_a_delta_that_does_not_fit() -> None:
    with pytest.raises(ValueError, match="need 1 <= Δ <= length − 1"):
        recall_batch(torch.tensor([12]), 12, 4, generator(0))
    with pytest.raises(ValueError, match="symbols=1"):
        recall_batch(torch.tensor([1]), 12, 1, generator(0))


def test_closest_width_matches_a_brute_force_search() -> None:
    for budget in (1, 50, 999, 1000, 1001, 12345):
        got = closest_width(lambda w: 3 * w * w + 7 * w, budget)
        best = min(range(1, 201), key=lambda w: (abs(3 * w * w + 7 * w - budget), w))
        assert abs(3 * got**2 + 7 * got - budget) == abs(3 * best**2 + 7 * best - budget)


@pytest.mark.parametrize("length", [9, 201])
def test_budgets_are_within_ten_percent(length: int) -> None:
    sizes = Sizes(vocab=17, classes=8, emb=32, length=length)
    widths = budget_widths(sizes, heads=2, layers=2)
    counts = {m: parameters(build(m, sizes, widths[m], 2, 2)) for m in MODELS}
    for m in MODELS:
        assert abs(counts[m] / counts["attention"] - 1) <= 0.10, counts


def test_lstm_parameter_count_by_hand() -> None:
    """E[V, E] + LSTM 4(H·E + H·H + 2H) + head (H·C + C)."""
    v, c, e, h = 17, 8, 32, 50
    model = build("lstm", Sizes(v, c, e, 20), h)
    assert parameters(model) == v * e + 4 * (h * e + h * h + 2 * h) + h * c + c


def test_every_model_reaches_the_first_token() -> None:
    """The last position's logits depend on e_0 (the CNN's receptive field 2^L covers T)."""
    assert [conv_layers(t) for t in (1, 2, 3, 8, 9, 201)] == [1, 1, 2, 3, 4, 8]
    sizes = Sizes(vocab=9, classes=4, emb=8, length=33)
    tokens = torch.randint(0, 9, (3, 33), generator=generator(2))
    for m in MODELS:
        torch.manual_seed(0)
        model = build(m, sizes, 8, 2, 2)
        g = input_gradient_norms(model, tokens, torch.tensor([0, 1, 2]), torch.zeros(3).long())
        assert g.shape == (3,) and bool((g > 0).all()), m


class FirstToken(SequenceClassifier):
    """logits = W e_0 + b: ∂ℓ/∂e_0 = Wᵀ(softmax(z) − onehot(y)), zero at every other position."""

    def features(self, e: Tensor) -> Tensor:
        return e[:, 0]  # (B, E)


def test_gradient_probe_against_the_hand_formula() -> None:
    torch.manual_seed(0)
    model = FirstToken(Sizes(vocab=6, classes=3, emb=4, length=5), width=4).double()
    tokens, labels = torch.randint(0, 6, (4, 5)), torch.tensor([0, 2, 1, 2])
    w, b = model.head.weight, model.head.bias  # (C, E), (C,)
    e0 = model.embed.weight[tokens[:, 0]]  # (B, E)
    p = torch.softmax(e0 @ w.T + b, dim=-1)  # (B, C)
    want = ((p - F.one_hot(labels, 3).double()) @ w).norm(dim=-1)  # (B,)
    got = input_gradient_norms(model, tokens, labels, torch.zeros(4).long())
    assert torch.allclose(got, want.detach(), atol=1e-12)
    elsewhere = input_gradient_norms(model, tokens, labels, torch.full((4,), 3))
    assert torch.equal(elsewhere, torch.zeros(4, dtype=torch.float64))


@pytest.mark.parametrize("name", MODELS)
def test_gradient_probe_equals_one_example_at_a_time(name: str) -> None:
    """One backward pass of the summed losses = each example's own gradient, alone."""
    sizes = Sizes(vocab=9, classes=4, emb=8, length=10)
    torch.manual_seed(1)
    model = build(name, sizes, 8, 2, 1).double()
    tokens, labels = recall_batch(torch.tensor([1, 4, 9]), 10, 4, generator(3))
    at = 9 - torch.tensor([1, 4, 9])
    got = input_gradient_norms(model, tokens, labels, at)
    for i in range(3):
        e = model.embed(tokens[i : i + 1]).detach().requires_grad_(True)  # (1, T, E)
        F.cross_entropy(model.readout(e), labels[i : i + 1]).backward()
        assert e.grad is not None
        assert got[i].item() == pytest.approx(e.grad[0, int(at[i])].norm().item(), rel=1e-9)


@pytest.mark.parametrize("name", ["gru", "attention"])
def test_gradient_by_delta_reads_the_position_delta_back(name: str) -> None:
    """Each Δ's number is the mean over the probe sequences of the gradient at position
    T - 1 - Δ (the marked symbol), computed here one example at a time."""
    cfg = DistanceConfig(**QUICK)  # type: ignore[arg-type]
    torch.manual_seed(2)
    model = build(name, cfg.sizes, 8, 2, 1)
    got = gradient_by_delta(model, cfg)
    double = build(name, cfg.sizes, 8, 2, 1).double()
    double.load_state_dict(model.state_dict())
    for d, value in zip(cfg.grid, got, strict=True):
        x, y = eval_batch(cfg, d)
        norms = []
        for i in range(cfg.grad_size):
            e = double.embed(x[i : i + 1]).detach().requires_grad_(True)  # (1, T, E)
            F.cross_entropy(double.readout(e), y[i : i + 1]).backward()
            assert e.grad is not None
            norms.append(e.grad[0, cfg.sizes.length - 1 - d].norm().item())
        assert value == pytest.approx(sum(norms) / len(norms), rel=1e-9)


def numbers(acc_short: dict[str, float], acc_long: dict[str, float],
            grad_long: dict[str, float]) -> tuple[dict, dict]:  # fmt: skip
    acc = {m: [acc_short[m], (acc_short[m] + acc_long[m]) / 2, acc_long[m]] for m in MODELS}
    grad = {m: [1.0, math.sqrt(grad_long[m]), grad_long[m]] for m in MODELS}
    return acc, grad


def test_verdict_reproduced() -> None:
    acc, grad = numbers(
        {"lstm": 1.0, "gru": 1.0, "cnn": 1.0, "attention": 1.0},
        {"lstm": 0.2, "gru": 0.13, "cnn": 0.5, "attention": 0.97},
        {"lstm": 1e-9, "gru": 1e-6, "cnn": 0.1, "attention": 0.8},
    )
    reasons, checks = verdict(acc, grad)
    assert reasons == [] and checks["reproduced"]
    assert checks["accuracy_drop"]["lstm"] == pytest.approx(0.8)
    assert checks["initial_gradient_ratio"]["gru"] == pytest.approx(1e-6)


def test_verdict_not_reproduced_when_the_lstm_solves_it() -> None:
    acc, grad = numbers(
        {"lstm": 1.0, "gru": 1.0, "cnn": 1.0, "attention": 1.0},
        {"lstm": 0.99, "gru": 0.5, "cnn": 0.5, "attention": 1.0},
        {"lstm": 1e-9, "gru": 1e-9, "cnn": 0.1, "attention": 0.8},
    )
    reasons, checks = verdict(acc, grad)
    assert reasons == ["LSTM lost only 1.0 points from the shortest to the longest Δ (< 25)"]
    assert not checks["reproduced"]


def test_verdict_not_reproduced_when_attention_fails() -> None:
    acc, grad = numbers(
        {"lstm": 0.9, "gru": 0.9, "cnn": 0.9, "attention": 0.5},
        {"lstm": 0.1, "gru": 0.1, "cnn": 0.1, "attention": 0.3},
        {"lstm": 0.5, "gru": 1e-9, "cnn": 0.1, "attention": 0.01},
    )
    reasons, _ = verdict(acc, grad)
    assert any("attention scored 50% at the shortest Δ" in r for r in reasons)
    assert any("attention lost 20.0 points" in r for r in reasons)
    assert any("LSTM's initial gradient Δmax/Δmin ratio is 0.5" in r for r in reasons)
    assert any("attention's initial gradient Δmax/Δmin ratio is 0.01" in r for r in reasons)
    assert len(reasons) == 4


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"deltas": "1,x"}, "comma-separated integers"),
        ({"deltas": "5"}, "at least two distances"),
        ({"deltas": "0,5"}, "at least 1"),
        ({"symbols": 1}, "--symbols 1"),
        ({"mix": "log"}, "choose grid or range"),
        ({"steps": 0}, "--steps"),
        ({"dim": 6, "heads": 4}, "divisible by --heads"),
        ({"grad_size": 999}, "--grad-size"),
        ({"lr": 0.0}, "--lr"),
    ],
)
def test_bad_settings_fail_clearly(overrides: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DistanceConfig(**overrides)
