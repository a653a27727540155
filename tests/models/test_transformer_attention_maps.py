"""``Transformer.attention_maps``: every attention of the model, per layer and head, against
weights written by hand from each layer's projections (Vaswani 2017, eq. 1:
softmax(Q Kᵀ / √d_k), Q = h W^Q + b, K = h W^K + b, split into heads); and the training and
decoding paths never ask for the self-attention weights."""

import math

import pytest
import torch

from attnkit.data.tasks import load_task
from attnkit.data.vocab import Vocab
from attnkit.decode import greedy
from attnkit.models import build_model
from attnkit.models.transformer import Transformer
from attnkit.modules import AttentionHeads, SelfAttention
from attnkit.train.loop import TrainConfig, train

pytestmark = pytest.mark.usefixtures("one_thread_module")

V_SRC, V_TGT = 23, 29
LENGTHS = torch.tensor([7, 4, 2])
VARIANTS = [dict(norm="post"), dict(norm="pre", share="none")]


def batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    src = torch.randint(3, V_SRC, (3, 7), generator=g)  # (B, S)
    src[torch.arange(7)[None, :] >= LENGTHS[:, None]] = 0
    tgt_in = torch.randint(3, V_TGT, (3, 5), generator=g)  # (B, T)
    return src, LENGTHS.clone(), tgt_in


def tiny(**kw) -> Transformer:
    torch.manual_seed(0)
    kw = {"preset": "tiny", "heads": 2, "enc_layers": 2, "dec_layers": 3, **kw}
    m = build_model("transformer", src_vocab=V_SRC, tgt_vocab=V_TGT, **kw)
    return m.double().eval()


def by_hand(attn: AttentionHeads, query, keys, allowed) -> torch.Tensor:
    """softmax(Q Kᵀ / √d_h) per head, from the module's projection matrices; query (B, Tq, D),
    keys (B, Tk, D), allowed (B, Tq, Tk) bool -> (B, H, Tq, Tk)."""
    h, d = attn.heads, attn.head_dim
    q = query @ attn.q_proj.weight.T + attn.q_proj.bias  # (B, Tq, D)
    k = keys @ attn.k_proj.weight.T + attn.k_proj.bias  # (B, Tk, D)
    q = q.view(q.shape[0], q.shape[1], h, d).transpose(1, 2)  # (B, H, Tq, d)
    k = k.view(k.shape[0], k.shape[1], h, d).transpose(1, 2)  # (B, H, Tk, d)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)  # (B, H, Tq, Tk)
    scores = scores.masked_fill(~allowed[:, None], float("-inf"))
    return torch.softmax(scores, dim=-1)


@pytest.mark.parametrize("kw", VARIANTS)
def test_every_map_equals_the_layers_weights_by_hand(kw) -> None:
    m = tiny(**kw)
    src, src_len, tgt_in = batch()
    b, s, t = src.shape[0], src.shape[1], tgt_in.shape[1]
    with torch.no_grad():
        maps = m.attention_maps(src, src_len, tgt_in)
        assert set(maps) == {"enc-self", "dec-self", "cross"}
        real = torch.arange(s)[None, :] < src_len[:, None]  # (B, S) may attend
        # encoder: each layer's input, then its weights by hand
        x = m.embed(m.src_emb, src)  # (B, S, D)
        mask = real[:, None, :]  # (B, 1, S)
        for layer_i, layer in enumerate(m.enc):
            want = by_hand(
                layer.attn, layer.res1.inner(x), layer.res1.inner(x), mask.expand(b, s, s)
            )
            torch.testing.assert_close(maps["enc-self"][:, layer_i], want)
            x, w = layer(x, mask)  # the training path: no weights
            assert w is None
        memory = m.encode(src, src_len)["memory"]  # (B, S, D)
        torch.testing.assert_close(m.enc_norm(x), memory)
        # decoder: causal self-attention, then cross-attention on the sublayer's output
        y = m.embed(m.tgt_emb, tgt_in)  # (B, T, D)
        causal = torch.ones(t, t, dtype=torch.bool).tril().expand(b, t, t)  # (B, T, T)
        for layer_i, layer in enumerate(m.dec):
            h = layer.res[0].inner(y)  # (B, T, D)
            want = by_hand(layer.self_attn, h, h, causal)
            torch.testing.assert_close(maps["dec-self"][:, layer_i], want)
            mid = layer.res[0].merge(y, layer.self_attn(h).context)  # (B, T, D)
            h2 = layer.res[1].inner(mid)
            want = by_hand(layer.cross_attn, h2, memory, mask.expand(b, t, s))
            torch.testing.assert_close(maps["cross"][:, layer_i], want)
            y, _, self_w = layer(y, layer.cross_attn.project_keys(memory), mask)
            assert self_w is None
        torch.testing.assert_close(maps["cross"], m.cross_attention(src, src_len, tgt_in))


def test_shapes_rows_sum_to_one_causal_and_no_padding() -> None:
    m = tiny()
    src, src_len, tgt_in = batch()
    with torch.no_grad():
        maps = m.attention_maps(src, src_len, tgt_in)
    enc, dec, cross = maps["enc-self"], maps["dec-self"], maps["cross"]
    assert enc.shape == (3, 2, 2, 7, 7)  # (B, L_enc, H, S, S)
    assert dec.shape == (3, 3, 2, 5, 5)  # (B, L_dec, H, T, T)
    assert cross.shape == (3, 3, 2, 5, 7)  # (B, L_dec, H, T, S)
    for w in (enc, dec, cross):
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1], dtype=w.dtype))
        assert (w >= 0).all()
    above = torch.ones(5, 5, dtype=torch.bool).triu(1)  # key after the query
    assert (dec[..., above] == 0).all() and (dec[..., ~above] > 0).all()
    pad = torch.arange(7)[None, :] >= src_len[:, None]  # (B, S)
    assert (enc.permute(0, 4, 1, 2, 3)[pad] == 0).all()  # no query sees a padded key
    assert (cross.permute(0, 4, 1, 2, 3)[pad] == 0).all()


def test_training_and_decoding_never_ask_for_self_attention_weights(monkeypatch, tmp_path) -> None:
    """A spy on every SelfAttention call (the encoder's, and the decoder's forward and
    incremental step): training and greedy decoding pass need_weights=False; only
    attention_maps passes True."""
    asked: list[bool] = []
    real = SelfAttention.attend_heads  # forward (fused q/k/v or not) and step all end here

    def spy(self, q, k, v, align=None, mask=None, need_weights=True, *rest):
        asked.append(bool(need_weights))
        return real(self, q, k, v, align, mask, need_weights, *rest)

    monkeypatch.setattr(SelfAttention, "attend_heads", spy)
    sp = load_task("toy-ko", seed=0, train_size=32, valid_size=8, test_size=0)
    sv, tv = Vocab.build(e.src for e in sp.train), Vocab.build(e.tgt for e in sp.train)
    torch.manual_seed(0)
    m = build_model("transformer", src_vocab=len(sv), tgt_vocab=len(tv), preset="tiny")
    cfg = TrainConfig(epochs=1, batch_size=16, lr=1e-3, progress=False, patience=0)
    train(m, "transformer", sp.train, sp.valid, sv, tv, cfg, tmp_path, log=lambda s: None)
    src, src_len = torch.tensor([[5, 6, 7, 2]]), torch.tensor([4])
    with torch.no_grad():
        greedy(m.eval(), src, src_len, max_len=4)
    assert len(asked) > 10 and not any(asked)  # every update and decoding step: False
    before = len(asked)
    with torch.no_grad():
        m.attention_maps(src, src_len, torch.tensor([[1, 5, 6]]))
    assert asked[before:] == [True] * (m.config.enc_layers + m.config.dec_layers)
