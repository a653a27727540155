"""Teacher forcing over packed targets (models/packed.py): RNNsearch and Luong's soft and mean
training loss skips the positions after each target's end, and gives the padded loop's loss
and gradients (float64, random weights), its logits and weights at the real positions and
zero after the end; the default takes it for CPU targets, soft and mean only."""

import pytest
import torch
from _spies import packed_calls
from hypothesis import given, settings
from hypothesis import strategies as st

from attnkit.models import build_model, packed
from attnkit.models.packed import rejoined, target_lengths


def model(name: str, softness: str = "soft", dropout: float = 0.0, **kw):  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    m = build_model(
        name, preset="tiny", src_vocab=15, tgt_vocab=13, softness=softness, dropout=dropout, **kw
    )  # fmt: skip
    for p in m.parameters():  # random weights of a visible scale (biases too)
        torch.nn.init.normal_(p, std=0.5)
    return m.double()


def batch(lengths: list[int], src_lengths: list[int] | None = None, seed: int = 0):
    """Targets of the given real lengths (unsorted, 0 = all padding), random sources."""
    g = torch.Generator().manual_seed(seed)
    n, t = len(lengths), max(max(lengths), 1)
    src_len = torch.tensor(src_lengths or [(3 * i) % 5 + 1 for i in range(n)])
    src = torch.randint(3, 15, (n, int(src_len.max())), generator=g)
    src[torch.arange(src.shape[1])[None] >= src_len[:, None]] = 0
    tgt = torch.randint(3, 13, (n, t + 1), generator=g)
    tgt[:, 0] = 1  # bos
    for i, k in enumerate(lengths):
        tgt[i, 1 + k :] = 0
    return src, src_len, tgt[:, :-1], tgt[:, 1:]


def loss_and_grads(m, b, packed_: bool, smoothing: float = 0.0):
    m.zero_grad(set_to_none=True)
    loss, out = m.training_loss(*b, smoothing, packed=packed_)
    loss.backward()
    grads = {k: p.grad for k, p in m.named_parameters() if p.grad is not None}
    return loss.detach(), out, grads


def check_equal(m, b, smoothing: float = 0.0) -> None:
    loss, out, grads = loss_and_grads(m, b, True, smoothing)
    ref_loss, ref, ref_grads = loss_and_grads(m, b, False, smoothing)
    torch.testing.assert_close(loss, ref_loss, rtol=0, atol=1e-12)
    assert grads.keys() == ref_grads.keys()
    for k in grads:
        torch.testing.assert_close(grads[k], ref_grads[k], rtol=0, atol=1e-10, msg=k)
    ran = torch.arange(b[3].shape[1])[None] < target_lengths(b[3])[:, None]  # (B, T)
    torch.testing.assert_close(out.logits[ran], ref.logits[ran], rtol=0, atol=1e-10)
    torch.testing.assert_close(out.weights[ran], ref.weights[ran], rtol=0, atol=1e-10)
    assert not out.logits[~ran].any() and not out.weights[~ran].any()


def test_target_lengths_are_the_last_real_position_plus_one() -> None:
    tgt = torch.tensor([[5, 3, 0, 0], [0, 0, 0, 0], [4, 0, 7, 0], [2, 2, 2, 2]])
    lengths = target_lengths(tgt)
    assert lengths.tolist() == [2, 1, 3, 4]  # all padding runs one (ignored) step
    assert lengths.device.type == "cpu" and lengths.dtype == torch.int64


@pytest.mark.parametrize("name", ["rnnsearch", "luong"])
@pytest.mark.parametrize("softness", ["soft", "mean"])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_packed_loss_and_gradients_equal_the_padded_loop(
    name: str, softness: str, smoothing: float
) -> None:
    """Unsorted lengths, ties, a row of padding only, a pad id inside a target."""
    m = model(name, softness)
    m.train()
    b = batch([3, 6, 1, 6, 0, 4])
    b[2][3, 2] = 0  # a pad id inside a target: ignored by both, and the input reads it
    b[3][3, 2] = 0
    check_equal(m, b, smoothing)


@pytest.mark.parametrize(
    "kw",
    [dict(align="local-m", window=1), dict(align="local-p", window=1, layers=2, cell="gru"),
     dict(score="location", input_feeding=False), dict(score="concat", layers=2)],
)  # fmt: skip
def test_packed_luong_variants(kw: dict) -> None:
    """Luong's state carries the step index (local-m), a predicted position (local-p), a
    GRU or LSTM stack and the input feed: each is sliced to the running rows."""
    m = model("luong", "soft", **kw)
    m.train()
    check_equal(m, batch([3, 6, 1, 6, 4], src_lengths=[5, 2, 4, 5, 3]), 0.1)


@pytest.mark.parametrize("softness", ["hard", "gumbel", "variational"])
def test_packed_true_is_refused_where_the_loss_reads_the_padded_layout(softness: str) -> None:
    m, b = model("rnnsearch", softness), batch([2, 4, 3])
    m.train()
    with pytest.raises(ValueError, match="soft and mean"):
        m.training_loss(*b, packed=True)


@pytest.mark.parametrize("name", ["rnnsearch", "luong"])
def test_dropout_models_agree_in_evaluation_mode(name: str) -> None:
    """With dropout built in but inactive (eval), the two paths agree; in training each
    draws its own masks (packed: for the real rows only)."""
    m = model(name, dropout=0.3)
    m.eval()
    check_equal(m, batch([2, 5, 4]))
    m.train()
    loss, _, grads = loss_and_grads(m, batch([2, 5, 4]), True)
    assert torch.isfinite(loss) and all(torch.isfinite(g).all() for g in grads.values())


@settings(max_examples=25, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 6), min_size=1, max_size=6).filter(any),  # a token to learn
    seed=st.integers(0, 2**16),
)
def test_packed_equals_padded_over_lengths(lengths: list[int], seed: int) -> None:
    m = model("rnnsearch")
    m.train()
    check_equal(m, batch(lengths, seed=seed))


@pytest.mark.parametrize(
    "softness, packs", [("soft", True), ("mean", True), ("hard", False), ("gumbel", False),
                        ("variational", False)],
)  # fmt: skip
def test_the_default_packs_cpu_targets_for_soft_and_mean(
    softness: str, packs: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = packed_calls(monkeypatch)
    m, b = model("rnnsearch", softness), batch([2, 4, 3])
    m.train()
    m.training_loss(*b)
    assert calls == ([1] if packs else [])
    m.training_loss(*b, packed=False)  # asked for the padded loop: never packed
    assert calls == ([1] if packs else [])


def test_rejoined_returns_the_whole_only_for_the_very_pieces() -> None:
    whole = torch.randn(7, 4)  # (N, E)
    pieces = whole.split([3, 2, 2])
    join = lambda x: torch.cat(list(x), 0)  # noqa: E731
    assert rejoined(pieces, pieces, whole, join) is whole
    copies = [p.clone() for p in pieces]
    joined = rejoined(copies, pieces, whole, join)
    assert joined is not whole and torch.equal(joined, whole)
    assert rejoined([pieces[0], copies[1], pieces[2]], pieces, whole, join) is not whole


@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_without_dropout_the_output_reads_the_packed_embeddings(
    dropout: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RNNsearch's deep output reads (s_i, E y_{i-1}): with p = 0 the embeddings are the
    (N, E) lookup itself, with dropout the dropped copies joined."""
    reused = []

    def spy(pieces, given_, whole, join):  # type: ignore[no-untyped-def]
        out = rejoined(pieces, given_, whole, join)
        reused.append(out is whole)
        return out

    monkeypatch.setattr(packed, "rejoined", spy)
    m = model("rnnsearch", dropout=dropout)
    m.train()
    m.training_loss(*batch([2, 4, 3]), packed=True)
    assert reused == [False, dropout == 0.0]
