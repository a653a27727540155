"""RNNsearch and RNNencdec: shapes, attention over real source tokens only, config checks."""

import pytest
import torch
from _seq2seq import random_sources

from attnkit.models import build_model, make_config
from attnkit.models.rnnsearch import RNNSearchConfig
from attnkit.stages.scores import AdditiveScore

pytestmark = pytest.mark.usefixtures("one_thread_module")


def inputs() -> tuple[torch.Tensor, ...]:
    return random_sources([7, 4, 1], tgt_len=5)


def test_rnnsearch_logits_and_attention_weights() -> None:
    model = build_model("rnnsearch", src_vocab=20, tgt_vocab=15, preset="tiny")
    assert isinstance(model.attention.score, AdditiveScore)  # attnkit's own module
    src, src_len, tgt_in = inputs()
    out = model(src, src_len, tgt_in)
    assert out.logits.shape == (3, 5, 15)
    assert out.weights is not None and out.weights.shape == (3, 5, 7)
    torch.testing.assert_close(out.weights.sum(-1), torch.ones(3, 5))
    assert (out.weights[1, :, 4:] == 0).all() and (out.weights[2, :, 1:] == 0).all()


def test_padding_does_not_change_the_output() -> None:
    model = build_model("rnnsearch", src_vocab=20, tgt_vocab=15, preset="tiny").eval()
    src, src_len, tgt_in = inputs()
    wide = torch.cat([src, torch.zeros(3, 4, dtype=torch.long)], 1)
    a, b = model(src, src_len, tgt_in), model(wide, src_len, tgt_in)
    torch.testing.assert_close(a.logits, b.logits)


def test_rnnencdec_has_no_attention() -> None:
    model = build_model("rnnencdec", src_vocab=20, tgt_vocab=15, preset="tiny")
    out = model(*inputs())
    assert out.logits.shape == (3, 5, 15) and out.weights is None


def test_configs_fail_clearly() -> None:
    with pytest.raises(ValueError, match="dropout"):
        RNNSearchConfig(src_vocab=5, tgt_vocab=5, dropout=1.5)
    with pytest.raises(ValueError, match="enc_hidden"):
        RNNSearchConfig(src_vocab=5, tgt_vocab=5, enc_hidden=0)
    with pytest.raises(ValueError, match="unknown preset"):
        make_config("rnnsearch", preset="huge", src_vocab=5, tgt_vocab=5)
    with pytest.raises(ValueError, match="no option"):
        make_config("rnnsearch", src_vocab=5, tgt_vocab=5, heads=3)
    with pytest.raises(ValueError, match="unknown model"):
        build_model("lstm9000", src_vocab=5, tgt_vocab=5)


@pytest.mark.parametrize("cell, layers, bidirectional", [("gru", 1, True), ("lstm", 2, True),
                                                          ("gru", 2, False)])  # fmt: skip
def test_run_packed_is_torchs_unsorted_packing(cell: str, layers: int, bidirectional: bool) -> None:
    """``encoders.run_packed`` (the permutation kept on the device) computes what
    pack_padded_sequence(enforce_sorted=False) + pad_packed_sequence do: outputs, final
    states and gradients, float64, unsorted lengths with ties."""
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    from attnkit.models.encoders import run_packed

    torch.manual_seed(0)
    rnn = {"gru": torch.nn.GRU, "lstm": torch.nn.LSTM}[cell](
        3, 4, num_layers=layers, batch_first=True, bidirectional=bidirectional
    ).double()  # fmt: skip
    x = torch.randn(5, 6, 3, dtype=torch.float64, requires_grad=True)
    lengths = torch.tensor([2, 6, 2, 1, 5])

    def flat(h):  # type: ignore[no-untyped-def]
        return torch.cat([t.flatten() for t in h]) if isinstance(h, tuple) else h.flatten()

    packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    out, h = rnn(packed)
    ref = pad_packed_sequence(out, batch_first=True, total_length=6)[0]
    ref_h = flat(h)
    states, h2 = run_packed(rnn, x, lengths, 6)
    torch.testing.assert_close(states, ref, rtol=0, atol=1e-12)
    torch.testing.assert_close(flat(h2), ref_h, rtol=0, atol=1e-12)
    g = [torch.randn_like(states), torch.randn_like(ref_h)]
    wrt = [x, *rnn.parameters()]
    grads = torch.autograd.grad((states * g[0]).sum() + (flat(h2) * g[1]).sum(), wrt)
    ref_grads = torch.autograd.grad((ref * g[0]).sum() + (ref_h * g[1]).sum(), wrt)
    for a, b in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
