"""Deng et al. (2018)'s decoder (``decoder="deng"``, models/latent.py): no attention
context in the recurrence, so the annotations reach the output only through the alignment.
Checked with a float64 recurrence written from the equations (RNNsearch: s_t = GRU(s_{t-1},
E y_{t-1}), α_t = softmax(vᵀ tanh(W s_t + U h_j)), output g(y_{t-1}, s_t, c)), the exact
marginal of the latent rows by enumeration, and the per-step path equal to teacher forcing."""

from __future__ import annotations

import pytest
import torch
from _seq2seq import training_losses
from test_softness import batch, model

from attnkit.models.latent import token_scores


def deng(name: str, softness: str, **kw):
    extra = {"input_feeding": False} if name == "luong" else {}
    return model(name, softness, decoder="deng", **extra, **kw).double()


def annotations_changed(memory: dict, seed: int = 3) -> dict:
    """The same memory with other annotations (keys and their projection): the decoder's
    initial state is kept, only what attention reads changes."""
    g = torch.Generator().manual_seed(seed)
    out = dict(memory)
    out["keys"] = torch.randn(memory["keys"].shape, generator=g, dtype=torch.float64)
    if "projected" in memory:
        out["projected"] = torch.randn(memory["projected"].shape, generator=g,
                                       dtype=torch.float64)  # fmt: skip
    return out


def states(m, memory: dict, tgt_in: torch.Tensor) -> list[torch.Tensor]:
    state, seen = m.init_state(memory), []
    for t in range(tgt_in.shape[1]):
        state = m.parts(tgt_in[:, t], state, memory).state
        seen.append(state[0])
    return seen


@pytest.mark.parametrize("name", ["rnnsearch", "luong"])
@pytest.mark.parametrize("softness", ["soft", "hard", "variational"])
def test_the_recurrence_reads_no_context(name: str, softness: str) -> None:
    """With decoder="deng" the decoder states do not move when the annotations do; with
    the default (RNNsearch, Luong with input feeding) they do."""
    src, src_len, tgt_in, _ = batch()
    for feed, moves in ((False, False), (True, True)):
        m = deng(name, softness) if not feed else model(name, softness).double()
        m.eval()
        memory = m.encode(src, src_len)
        a = states(m, memory, tgt_in)
        b = states(m, annotations_changed(memory), tgt_in)
        same = all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
        assert same is not moves, (feed, softness)


def test_rnnsearch_step_equals_the_equations_in_float64() -> None:
    m = deng("rnnsearch", "soft")
    m.eval()
    src, src_len, tgt_in, _ = batch()
    memory = m.encode(src, src_len)
    s_prev = m.init_state(memory)[0]
    parts = m.parts(tgt_in[:, 0], (s_prev,), memory)
    y = m.tgt_emb(tgt_in[:, 0])  # (B, E)
    cell = m.cell
    gi, gh = y @ cell.weight_ih.T + cell.bias_ih, s_prev @ cell.weight_hh.T + cell.bias_hh
    r, z, n = gi.chunk(3, -1)
    hr, hz, hn = gh.chunk(3, -1)
    r, z = torch.sigmoid(r + hr), torch.sigmoid(z + hz)
    s = (1 - z) * torch.tanh(n + r * hn) + z * s_prev  # s_t from E y_{t-1} alone (B, m)
    score = m.attention.score
    keys, mask = memory["keys"], memory["mask"][:, 0]  # (B, S, 2n), (B, S)
    e = torch.stack([score(s[i, None, None], keys[i, None])[0, 0] for i in range(6)])  # (B, S)
    alpha = torch.softmax(e.masked_fill(~mask, float("-inf")), -1)  # (B, S)
    torch.testing.assert_close(parts.state[0], s, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(parts.alpha, alpha, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(parts.context, (alpha[..., None] * keys).sum(1), rtol=1e-10,
                               atol=1e-12)  # fmt: skip


@pytest.mark.parametrize("name", ["rnnsearch", "luong"])
@pytest.mark.parametrize("softness", ["hard", "variational"])
def test_the_latent_rows_marginal_is_exact_and_steps_match_teacher_forcing(name, softness):
    m = deng(name, softness)
    m.eval()
    src, src_len, tgt_in, tgt_out = batch()
    ll, _ = token_scores(m, src, src_len, tgt_in, tgt_out)  # (B, T)
    memory, state = m.encode(src, src_len), None
    state = m.init_state(memory)
    real = tgt_out != 0
    for t in range(tgt_in.shape[1]):
        parts = m.parts(tgt_in[:, t], state, memory)
        probs = torch.softmax(parts.readout(parts.values), -1)  # p(y | z = s) (B, S, V)
        alpha = parts.alpha / parts.alpha.sum(-1, keepdim=True)  # (B, S)
        marginal = (alpha[..., None] * probs).sum(1)  # Σ_z p(z) p(y | z) (B, V)
        want = marginal.gather(-1, tgt_out[:, t, None])[:, 0].log()
        # (the model's log-softmax runs in float32 whatever the weights: 1e-6)
        torch.testing.assert_close(ll[:, t][real[:, t]], want[real[:, t]], rtol=1e-6,
                                   atol=1e-6)  # fmt: skip
        state = parts.state
    forced = m(src, src_len, tgt_in).logits  # teacher forcing, output layer once
    state, stepped = m.init_state(memory), []
    for t in range(tgt_in.shape[1]):
        logits, _, state = m.step(tgt_in[:, t], state, memory)
        stepped.append(logits)
    torch.testing.assert_close(torch.stack(stepped, 1), forced, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("softness", ["soft", "hard", "variational"])
def test_each_row_trains_with_dengs_decoder(softness: str) -> None:
    first, last = training_losses(deng("rnnsearch", softness).float(), batch())
    assert last < 0.8 * first


def test_luong_with_input_feeding_refuses_dengs_decoder() -> None:
    with pytest.raises(ValueError, match="needs input_feeding=False"):
        model("luong", "hard", decoder="deng")


def test_the_flag_reaches_the_config(tmp_path, capsys) -> None:
    from attnkit.cli import main

    argv = ["train", "--task", "copy", "--train-size", "32", "--valid-size", "8",
            "--test-size", "8", "--model", "rnnsearch", "--preset", "tiny", "--epochs", "1",
            "--softness", "hard", "--decoder", "deng", "--no-progress",
            "--out", str(tmp_path / "r")]  # fmt: skip
    assert main(argv) == 0
    from attnkit.train import checkpoint

    loaded = checkpoint.load(tmp_path / "r" / "best")
    assert loaded.model.config.decoder == "deng"
    assert loaded.model.cell.weight_ih.shape[1] == loaded.model.config.emb
