"""The exact-marginal row of Deng et al. (2018), Table 1 (``softness="exact"``,
models/latent.py): trained on −log Σ_z p(z_t) p(y_t | z_t) by enumeration. Checked against a
float64 loop over z written by hand (one annotation at a time, probabilities summed, then the
log), its gradients against the loop's, a gradcheck of the loss on its inputs, the per-step
path against teacher forcing, and that it trains with both decoders of both models."""

from __future__ import annotations

import math

import pytest
import torch
from _seq2seq import training_losses
from test_softness import batch, model

from attnkit.models.latent import MixtureOutput, Unrolled, exact_marginal_loss, token_scores


def exact(name: str, decoder: str = "deng", **kw):
    extra = {"input_feeding": False} if name == "luong" and decoder == "deng" else {}
    return model(name, "exact", decoder=decoder, **extra, **kw).double()


def loop_loss(m, src, src_len, tgt_in, tgt_out) -> torch.Tensor:
    """The token mean of −log Σ_z α_tz softmax(readout(h_z))[y_t], one sentence, one step and
    one annotation z at a time, the sum over z in probabilities (no logsumexp)."""
    memory = m.encode(src, src_len)
    state = m.init_state(memory)
    terms = []
    for t in range(tgt_in.shape[1]):
        parts = m.parts(tgt_in[:, t], state, memory)
        state = parts.state
        for b in range(src.shape[0]):
            gold = int(tgt_out[b, t])
            if gold == 0:
                continue
            allowed = [z for z in range(src.shape[1]) if bool(parts.mask[b, z])]
            total = parts.alpha[b, allowed].sum()  # 1 up to rounding
            p = 0.0 * parts.alpha[b, 0]
            for z in allowed:
                prior = parts.alpha[b, z] / total
                ctx = parts.values[:, z]  # (B, Dv): annotation z for every sentence
                probs = torch.softmax(parts.readout(ctx)[b], -1)  # (V,)
                p = p + prior * probs[gold]
            terms.append(-torch.log(p))
    return torch.stack(terms).mean()


@pytest.mark.parametrize("name", ["rnnsearch", "luong"])
@pytest.mark.parametrize("decoder", ["deng", "context"])
def test_loss_and_gradients_equal_a_float64_loop_over_z(name: str, decoder: str) -> None:
    m = exact(name, decoder)
    m.train()  # tiny presets have no dropout; train mode is the loss's own mode
    b = batch()
    loss, _ = m.training_loss(*b)
    params = [p for p in m.parameters() if p.requires_grad]
    got = torch.autograd.grad(loss, params, allow_unused=True)
    want_loss = loop_loss(m, *b)
    want = torch.autograd.grad(want_loss, params, allow_unused=True)
    assert loss.dtype == torch.float64
    torch.testing.assert_close(loss, want_loss, rtol=1e-12, atol=1e-12)
    for p, g, w in zip(params, got, want, strict=True):
        g = torch.zeros_like(p) if g is None else g
        w = torch.zeros_like(p) if w is None else w
        torch.testing.assert_close(g, w, rtol=1e-9, atol=1e-11)
    assert any(g is not None and bool(g.abs().sum() > 0) for g in got)


def test_the_marginal_loss_passes_gradcheck() -> None:
    """exact_marginal_loss on its own inputs: attention weights from free scores (B, T, S),
    a mask with padded keys, per-annotation logits (B, S, V) read out as they are."""
    g = torch.Generator().manual_seed(0)
    B, T, S, V = 2, 3, 4, 5
    scores = torch.randn(B, T, S, generator=g, dtype=torch.float64, requires_grad=True)
    values = torch.randn(B, S, V, generator=g, dtype=torch.float64, requires_grad=True)
    mask = torch.ones(B, T, S, dtype=torch.bool)
    mask[1, :, 3:] = False  # sentence 1 has 3 source words
    y = torch.randint(0, V, (B, T), generator=g)

    def f(scores: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        alpha = torch.softmax(scores.masked_fill(~mask, -torch.inf), -1)  # (B, T, S)
        run = Unrolled(alpha, alpha @ values, values, mask, (), lambda f, ctx: ctx, None, None)
        return exact_marginal_loss(run, y)[1]  # (B, T)

    assert torch.autograd.gradcheck(f, (scores, values))
    # and the value by hand: −log Σ_z α_z softmax(values_z)[y]
    with torch.no_grad():
        nll = f(scores, values)
        alpha = torch.softmax(scores.masked_fill(~mask, -torch.inf), -1)
    for b in range(B):
        for t in range(T):
            p = sum(float(alpha[b, t, z]) * float(torch.softmax(values[b, z].detach(), -1)[y[b, t]])
                    for z in range(S) if mask[b, t, z])  # fmt: skip
            assert float(nll[b, t]) == pytest.approx(-math.log(p), rel=1e-12)


@pytest.mark.parametrize("name", ["rnnsearch", "luong"])
def test_test_time_is_the_marginal_and_steps_match_teacher_forcing(name: str) -> None:
    m = exact(name)
    m.eval()
    src, src_len, tgt_in, tgt_out = b = batch()
    ll, bound = token_scores(m, *b)  # (B, T)
    real = tgt_out != 0
    loss, _ = m.training_loss(*b)  # deterministic: no sample, no dropout
    assert bound is None
    torch.testing.assert_close(-ll[real].mean(), loss, rtol=1e-12, atol=1e-12)
    forced = m(src, src_len, tgt_in).logits  # (B, T, V) log of the marginal
    memory = m.encode(src, src_len)
    state, stepped = m.init_state(memory), []
    for t in range(tgt_in.shape[1]):
        logits, _, state = m.step(tgt_in[:, t], state, memory)
        stepped.append(logits)
    torch.testing.assert_close(torch.stack(stepped, 1), forced, rtol=1e-10, atol=1e-10)
    gold = forced.gather(-1, tgt_out[..., None])[..., 0]
    torch.testing.assert_close(gold[real], ll[real], rtol=1e-10, atol=1e-10)
    assert not hasattr(m, "updates")  # deterministic: no update counter, no baseline


@pytest.mark.parametrize("name", ["rnnsearch", "luong"])
@pytest.mark.parametrize("decoder", ["deng", "context"])
def test_exact_trains(name: str, decoder: str) -> None:
    first, last = training_losses(exact(name, decoder).float(), batch())
    assert last < 0.8 * first


def test_packed_is_refused_and_the_cli_trains_it(tmp_path) -> None:
    from attnkit.cli import main
    from attnkit.train import checkpoint

    with pytest.raises(ValueError, match="packed targets are for the soft and mean"):
        exact("rnnsearch").training_loss(*batch(), packed=True)
    argv = ["train", "--task", "copy", "--train-size", "32", "--valid-size", "8",
            "--test-size", "8", "--model", "rnnsearch", "--preset", "tiny", "--epochs", "1",
            "--softness", "exact", "--decoder", "deng", "--no-progress",
            "--out", str(tmp_path / "r")]  # fmt: skip
    assert main(argv) == 0
    cfg = checkpoint.load(tmp_path / "r" / "best").model.config
    assert (cfg.softness, cfg.decoder) == ("exact", "deng")


def loop_mixture(m, src, src_len, tgt_in, log_w) -> torch.Tensor:
    """log Σ_z w_tz softmax(readout(h_z)) (B, T, V), one step and one annotation z at a time,
    the sum in probabilities (no logsumexp): w = exp(log_w) (B, T, S), 0 off the mask."""
    memory = m.encode(src, src_len)
    state, rows = m.init_state(memory), []
    for t in range(tgt_in.shape[1]):
        parts = m.parts(tgt_in[:, t], state, memory)
        state = parts.state
        p = sum(log_w[:, t, z, None].exp() * parts.mask[:, z, None]
                * torch.softmax(parts.readout(parts.values[:, z]), -1)
                for z in range(src.shape[1]))  # fmt: skip
        rows.append(torch.log(p))  # (B, V)
    return torch.stack(rows, 1)


@pytest.mark.parametrize("name", ["rnnsearch", "luong"])
@pytest.mark.parametrize("softness", ["exact", "variational"])
def test_training_logits_are_the_mixture_without_a_graph(name: str, softness: str) -> None:
    """Issue 29 §3: the enumerated losses share one log-softmax with the mixture they return,
    and the mixture, which no loss reads, keeps no graph. In float64 the returned logits are
    still log Σ_z w_z p(· | z) (the prior for exact, q for variational-enumerate), from a loop
    over z, and the loss still has its gradient."""
    extra = {"input_feeding": False} if name == "luong" else {}
    m = model(name, softness, decoder="deng", **extra).double()
    m.train()
    src, src_len, tgt_in, tgt_out = b = batch()
    loss, out = m.training_loss(*b)
    assert isinstance(out, MixtureOutput) and out._logits is None  # not computed unless read
    assert loss.requires_grad and not out.logits.requires_grad
    assert out.logits is out.logits  # computed once, then kept
    with torch.no_grad():
        memory = m.encode(src, src_len)
        mask = memory["mask"][:, 0]  # (B, S)
        if softness == "exact":
            log_w = torch.log_softmax(m(src, src_len, tgt_in).weights.log(), -1)  # the prior
        else:
            log_w = m.inference(tgt_out, memory["keys"], mask)  # log q (B, T, S)
        want = loop_mixture(m, src, src_len, tgt_in, log_w)
    torch.testing.assert_close(out.logits, want, rtol=1e-10, atol=1e-10)
    if softness == "exact":  # and it is still the test-time output
        torch.testing.assert_close(out.logits, m(src, src_len, tgt_in).logits, rtol=1e-12,
                                   atol=1e-12)  # fmt: skip
