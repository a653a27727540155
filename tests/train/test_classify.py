"""fit_classifier: the loss falls on a learnable problem, the same seed gives the same
weights, clipping bounds each update's gradient, and bad arguments fail clearly."""

import pytest
import torch
from torch import nn

from attnkit.train.classify import accuracy, fit_classifier


def separable(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Two Gaussian blobs at ±3 on the first axis: linearly separable (label = x₀ > 0)."""
    g = torch.Generator().manual_seed(1000 + step)
    y = torch.randint(0, 2, (32,), generator=g)
    x = torch.randn(32, 4, generator=g)
    x[:, 0] += 6.0 * y - 3.0
    return x, y


def net(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.2), nn.ReLU(), nn.Linear(8, 2))


def test_loss_falls_and_accuracy_rises(one_thread: None) -> None:
    model = net(0)
    hist = fit_classifier(model, separable, steps=60, lr=1e-2, seed=0)
    assert hist.steps == 60 and len(hist.loss) == len(hist.accuracy) == 60
    assert sum(hist.loss[-10:]) / 10 < 0.5 * sum(hist.loss[:10]) / 10
    assert accuracy(model, *separable(-1)) >= 0.95
    assert not model.training  # left in eval mode


def test_same_seed_same_weights_other_seed_other_dropout(one_thread: None) -> None:
    a, b, c = net(3), net(3), net(3)
    for m, seed in ((a, 7), (b, 7), (c, 8)):
        fit_classifier(m, separable, steps=5, lr=1e-2, seed=seed)
    pa, pb, pc = (torch.cat([p.flatten() for p in m.parameters()]) for m in (a, b, c))
    assert torch.equal(pa, pb)
    assert not torch.equal(pa, pc)  # the seed drives the dropout masks


def test_clipping_bounds_the_gradient(one_thread: None, monkeypatch) -> None:
    """At a huge input scale the raw gradient is huge; what Adam sees has norm <= clip."""
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    seen: list[tuple[float, float]] = []
    orig = torch.nn.utils.clip_grad_norm_

    def spy(params, max_norm, *a, **k):  # type: ignore[no-untyped-def]
        params = list(params)
        before = orig(params, max_norm, *a, **k)  # returns the norm before clipping
        after = torch.cat([p.grad.flatten() for p in params]).norm()
        seen.append((float(before), float(after)))
        return before

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", spy)
    fit_classifier(model, lambda s: (1e4 * separable(s)[0], separable(s)[1]), steps=3,
                   lr=1e-3, seed=0, clip=0.5)  # fmt: skip
    assert len(seen) == 3
    assert all(before > 10 and after <= 0.5 + 1e-5 for before, after in seen)


def test_logs_every_n_steps(one_thread: None) -> None:
    lines: list[str] = []
    fit_classifier(net(0), separable, steps=6, lr=1e-2, seed=0, log=lines.append, log_every=2)
    assert len(lines) == 3 and lines[-1].startswith("step 6/6  loss ")


def test_bad_arguments_fail_clearly() -> None:
    with pytest.raises(ValueError, match="learning rate must be positive"):
        fit_classifier(net(0), separable, steps=1, lr=0.0, seed=0)
    with pytest.raises(ValueError, match="steps=-1"):
        fit_classifier(net(0), separable, steps=-1, lr=1e-3, seed=0)
    with pytest.raises(ValueError, match="clip=-1"):
        fit_classifier(net(0), separable, steps=1, lr=1e-3, seed=0, clip=-1)


def test_until_stops_after_the_update_it_first_says_true(one_thread: None) -> None:
    """``until`` sees the history after each update; training stops at the first True, and the
    weights are those of a run of exactly that many steps (same batches, same seed)."""
    seen: list[int] = []

    def at_four(h: object) -> bool:
        assert len(h.loss) == h.steps  # type: ignore[attr-defined]
        seen.append(h.steps)  # type: ignore[attr-defined]
        return h.steps == 4  # type: ignore[attr-defined]

    a, b = net(5), net(5)
    hist = fit_classifier(a, separable, steps=50, lr=1e-2, seed=1, until=at_four)
    assert seen == [1, 2, 3, 4] and hist.steps == 4 and len(hist.accuracy) == 4
    fit_classifier(b, separable, steps=4, lr=1e-2, seed=1)
    pa, pb = (torch.cat([p.flatten() for p in m.parameters()]) for m in (a, b))
    assert torch.equal(pa, pb)
    never = fit_classifier(net(5), separable, steps=6, lr=1e-2, seed=1, until=lambda h: False)
    assert never.steps == 6
