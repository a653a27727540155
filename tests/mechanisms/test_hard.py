"""Hard attention: sampled reduction (Xu 2015) with REINFORCE, and the Gumbel-softmax
normaliser (Jang 2017) with the straight-through gradient."""

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given, settings

import attnkit
from attnkit.mechanisms.hard import (
    GumbelSoftmax,
    MovingAverageBaseline,
    SampleReduce,
    reinforce_loss,
)
from attnkit.stages.normalisers import masked_softmax

F64 = torch.float64


@settings(max_examples=40, deadline=None)
@given(
    b=st.integers(1, 3),
    tq=st.integers(1, 4),
    tk=st.integers(1, 6),
    dv=st.integers(1, 3),
    seed=st.integers(0, 10_000),
    greedy=st.booleans(),
)
def test_sample_is_a_value_row_on_an_allowed_key(b, tq, tk, dv, seed, greedy) -> None:
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(b, tq, tk, generator=g, dtype=F64)
    mask = torch.rand(b, tq, tk, generator=g) < 0.6
    mask[0, 0] = False  # one fully masked row
    values = torch.randn(b, tk, dv, generator=g, dtype=F64)
    w = masked_softmax(scores, mask)
    torch.manual_seed(seed)
    out = SampleReduce(greedy=greedy)(w, values)
    idx, ok = out.extras["index"], mask.any(-1)
    assert bool(mask.gather(-1, idx[..., None])[..., 0][ok].all())  # never a masked key
    want = values.gather(1, idx.flatten(1)[..., None].expand(-1, -1, dv)).view(b, tq, dv)
    torch.testing.assert_close(out.context, want * ok[..., None], rtol=0, atol=0)
    chosen = w.gather(-1, idx[..., None])[..., 0]
    torch.testing.assert_close(out.extras["log_prob"][ok], chosen[ok].log())
    assert float(out.extras["log_prob"][0, 0]) == 0.0 and float(out.context[0, 0].abs().sum()) == 0
    if greedy:
        assert torch.equal(idx[ok], w.argmax(-1)[ok])


def test_sample_frequencies_follow_the_weights() -> None:
    torch.manual_seed(0)
    w = torch.tensor([[0.05, 0.15, 0.0, 0.5, 0.3]], dtype=F64)  # (Tq=1, Tk=5)
    n = 20_000
    idx = SampleReduce()(w.expand(n, 1, 5), torch.eye(5, dtype=F64)).extras["index"]
    freq = torch.bincount(idx.flatten(), minlength=5).double() / n
    sigma = (w[0] * (1 - w[0]) / n).sqrt()
    assert bool(((freq - w[0]).abs() <= 4 * sigma + 1e-12).all()), freq
    assert freq[2] == 0


def test_entropy_and_masked_rows_have_no_nan_gradients() -> None:
    scores = torch.randn(2, 3, 4, dtype=F64, requires_grad=True)
    mask = torch.ones(2, 3, 4, dtype=torch.bool)
    mask[1, 2] = False
    mask[0, 1, :2] = False
    w = masked_softmax(scores, mask)
    out = SampleReduce()(w, torch.randn(2, 4, 5, dtype=F64))
    ent = out.extras["entropy"]
    ref = -(w * w.clamp_min(1e-300).log()).sum(-1)
    torch.testing.assert_close(ent, ref)
    (out.extras["log_prob"].sum() + ent.sum()).backward()
    assert scores.grad is not None and bool(torch.isfinite(scores.grad).all())
    assert float(scores.grad[1, 2].abs().sum()) == 0.0


def test_reinforce_is_unbiased_and_the_baseline_cuts_variance() -> None:
    """∇_e E_{z~softmax(e)}[f(z)] = Σ_z f(z) ∇ softmax(e)_z (exact, float64) equals the mean of
    the REINFORCE estimates; subtracting a baseline keeps the mean and lowers the variance."""
    torch.manual_seed(0)
    e = torch.tensor([0.3, -1.0, 0.8, 0.1], dtype=F64)
    f = torch.tensor([1.0, 3.0, 2.0, 5.0], dtype=F64) + 10.0  # large offset: baseline matters
    e1 = e.clone().requires_grad_(True)
    exact = torch.autograd.grad((torch.softmax(e1, -1) * f).sum(), e1)[0]

    def per_sample_grads(baseline: float, n: int = 20_000) -> torch.Tensor:
        e2 = e.clone().requires_grad_(True)
        w = torch.softmax(e2, -1).expand(n, 1, 4)  # (N, Tq=1, Tk)
        out = SampleReduce()(w, torch.zeros(4, 1, dtype=F64))
        reward = f[out.extras["index"][:, 0]]  # (N,)
        lp = out.extras["log_prob"]  # (N, 1)
        grads = torch.autograd.grad(-reinforce_loss(lp, reward, baseline) * n, e2)[0]
        # per-sample estimates, for the variance: (f - b) * (onehot - softmax)
        onehot = out.extras["sample"][:, 0]  # (N, Tk)
        est = (reward - baseline)[:, None] * (onehot - torch.softmax(e, -1))
        torch.testing.assert_close(grads / n, est.mean(0))
        return est

    plain, based = per_sample_grads(0.0), per_sample_grads(float((torch.softmax(e, -1) * f).sum()))
    for est in (plain, based):
        se = est.std(0) / est.shape[0] ** 0.5
        assert bool(((est.mean(0) - exact).abs() <= 4 * se + 1e-9).all())
    assert bool((based.var(0) < 0.2 * plain.var(0)).all())


def test_reinforce_loss_terms_and_errors() -> None:
    lp = torch.tensor([[-1.0, -2.0], [-0.5, -0.5]])
    r = torch.tensor([2.0, 0.0])
    ent = torch.tensor([[0.5, 0.5], [1.0, 0.0]])
    got = reinforce_loss(lp, r, 1.0, entropy=ent, entropy_weight=0.1)
    want = -((1.0 * -3.0) + (-1.0 * -1.0)) / 2 - 0.1 * (1.0 + 1.0) / 2
    assert float(got) == pytest.approx(want)
    with pytest.raises(ValueError, match="reward must be"):
        reinforce_loss(lp, torch.zeros(3))


def test_moving_average_baseline() -> None:
    b = MovingAverageBaseline(decay=0.5)
    assert b.update(torch.tensor([2.0, 4.0])) == 3.0  # first call: the batch mean
    assert b.update(torch.tensor([5.0])) == 3.0  # the value before this update...
    assert b.value == pytest.approx(4.0)  # ...which moves halfway
    with pytest.raises(ValueError, match="decay"):
        MovingAverageBaseline(decay=1.0)


def test_gumbel_hard_sample_is_one_hot_with_softmax_frequencies() -> None:
    torch.manual_seed(0)
    scores = torch.tensor([0.2, 1.0, -0.5, 0.7], dtype=F64)
    mask = torch.tensor([True, True, False, True])
    n = 20_000
    w = GumbelSoftmax(temperature=0.5)(scores.expand(n, 1, 4), mask)  # (N, 1, 4)
    assert bool(((w == 0) | (w - 1).abs().lt(1e-12)).all())
    torch.testing.assert_close(w.sum(-1), torch.ones(n, 1, dtype=F64))
    freq = w[:, 0].mean(0)
    p = masked_softmax(scores, mask)  # the Gumbel-max trick: argmax ~ softmax(e)
    assert bool(((freq - p).abs() <= 4 * (p * (1 - p) / n).sqrt() + 1e-12).all()), freq
    assert float(freq[2]) == 0.0


def test_gumbel_straight_through_gradient_is_the_relaxed_samples() -> None:
    scores = torch.randn(3, 2, 5, dtype=F64, requires_grad=True)
    c = torch.randn(3, 2, 5, dtype=F64)
    torch.manual_seed(1)
    (GumbelSoftmax(0.7)(scores) * c).sum().backward()
    hard_grad = scores.grad.clone()
    scores.grad = None
    torch.manual_seed(1)
    (GumbelSoftmax(0.7, hard=False)(scores) * c).sum().backward()
    torch.testing.assert_close(hard_grad, scores.grad)


def test_gumbel_without_sampling_and_fully_masked_rows() -> None:
    s = torch.tensor([[0.1, 2.0, 0.3], [1.0, 1.0, 1.0]])
    mask = torch.tensor([[True, True, True], [False, False, False]])
    hard = GumbelSoftmax(sample=False)(s, mask)
    assert hard.tolist() == [[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]
    soft = GumbelSoftmax(2.0, hard=False, sample=False)(s, mask)
    torch.testing.assert_close(soft, masked_softmax(s, mask, 2.0))
    with pytest.raises(ValueError, match="temperature must be > 0"):
        GumbelSoftmax(0.0)


def test_hard_attention_through_attend_and_the_module() -> None:
    torch.manual_seed(0)
    q, k = torch.randn(2, 3, 8), torch.randn(2, 6, 8)
    v = torch.randn(2, 6, 4)
    r = attnkit.attend(q, k, v, reduce=SampleReduce())
    assert set(r.extras) >= {"index", "log_prob", "entropy", "sample"}
    assert r.weights is not None and r.extras["log_prob"].shape == (2, 3)
    want = v.gather(1, r.extras["index"][..., None].expand(-1, -1, 4))
    torch.testing.assert_close(r.context, want)
    m = attnkit.Attention(attnkit.GeneralScore(8, 8), normaliser=GumbelSoftmax())
    out = m(q, k, v)
    rows = (out.context[..., None, :] - v[:, None]).abs().sum(-1).min(-1).values  # (B, Tq)
    assert float(rows.detach().max()) < 1e-5  # each context is one value row
    out.context.sum().backward()
    assert m.score.weight.grad is not None and float(m.score.weight.grad.abs().sum()) > 0


def pointer_batch(g: torch.Generator, n: int = 64, t: int = 6, d: int = 8):
    """Keys (n, t, d) with one marked key per row (feature 0 = +2); the target is that key."""
    keys = torch.randn(n, t, d, generator=g)
    keys[..., 0] = 0.0
    star = torch.randint(0, t, (n,), generator=g)
    keys[torch.arange(n), star, 0] = 2.0
    return keys, star


def train_pointer(normaliser, reduce, steps: int = 300) -> float:
    """Learn to attend to the marked key; return the greedy hit rate on fresh data."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    att = attnkit.Attention(attnkit.GeneralScore(8, 8), normaliser=normaliser, reduce=reduce)
    opt = torch.optim.Adam(att.parameters(), lr=0.05)
    query = torch.ones(64, 1, 8)
    baseline = MovingAverageBaseline(0.9)
    for _ in range(steps):
        keys, star = pointer_batch(g)
        r = att(query, keys)
        target = keys[torch.arange(64), star][:, None]  # (n, 1, d)
        err = (r.context - target).pow(2).sum((-1, -2))  # (n,)
        loss = err.mean()
        if "log_prob" in r.extras:  # sampled: the context carries no gradient to the scores
            loss = loss + reinforce_loss(r.extras["log_prob"], -err, baseline.update(-err))
        opt.zero_grad()
        loss.backward()
        opt.step()
    keys, star = pointer_batch(torch.Generator().manual_seed(99), n=500)
    with torch.no_grad():
        w = att(torch.ones(500, 1, 8), keys).weights  # (n, 1, t)
    return float((w[:, 0].argmax(-1) == star).float().mean())


def test_reinforce_and_gumbel_both_learn_where_to_look() -> None:
    """A pointer task: only the marked key gives zero error. Chance is 1/6; both hard
    attention estimators learn to attend it."""
    assert train_pointer(attnkit.softmax, SampleReduce(), steps=0) < 0.4
    assert train_pointer(attnkit.softmax, SampleReduce()) > 0.95
    assert train_pointer(GumbelSoftmax(0.5), attnkit.weighted_sum) > 0.95


def test_the_docs_hard_attention_example_runs() -> None:
    from pathlib import Path

    page = (Path(__file__).parents[2] / "docs" / "softness.md").read_text("utf-8")
    section = page[page.index("## Hard attention in code") :]
    code = section[section.index("```python") + len("```python") : section.index("```\n", 20)]
    scope: dict = {}
    exec(compile(code, "docs/softness.md", "exec"), scope)  # noqa: S102
    assert scope["r"].context.shape == (4, 1, 16)
    assert scope["att"].score.w_query.grad is not None  # REINFORCE reached the score
