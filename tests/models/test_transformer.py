"""Transformer (Vaswani 2017): shapes, padding, causality, parallel forward == step-by-step
decoding, per-head cross-attention, training lowers the loss, checkpoints round-trip."""

import _seq2seq as seq2seq
import pytest
import torch

from attnkit.data.vocab import Vocab
from attnkit.decode import greedy
from attnkit.models import build_model
from attnkit.models.transformer import TransformerConfig, sinusoids
from attnkit.train import checkpoint

pytestmark = pytest.mark.usefixtures("one_thread_module")

V_SRC, V_TGT = 23, 29
LENGTHS = torch.tensor([9, 6, 3])
VARIANTS = [
    dict(norm="post", share="output"),
    dict(norm="pre", share="none"),
    dict(norm="pre", share="all", src_vocab=V_TGT),
]


def batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, V_SRC, (3, 9), generator=g)  # (B, S)
    src[torch.arange(9)[None, :] >= LENGTHS[:, None]] = 0
    tgt = torch.randint(3, V_TGT, (3, 7), generator=g)  # (B, T)
    return src, LENGTHS.clone(), tgt


def model(**kw):
    torch.manual_seed(0)
    kw = {"src_vocab": V_SRC, "tgt_vocab": V_TGT, "preset": "tiny", "dec_layers": 2, **kw}
    return build_model("transformer", **kw).eval()


@pytest.mark.parametrize("kw", VARIANTS)
def test_shapes_padding_and_per_head_weights(kw) -> None:
    m = model(heads=2, **kw)
    src, src_len, tgt = batch()
    with torch.no_grad():
        out = m(src, src_len, tgt)
        heads = m.cross_attention(src, src_len, tgt)  # (B, L, H, T, S)
    assert out.logits.shape == (3, 7, V_TGT) and out.weights is not None
    assert out.weights.shape == (3, 7, 9) and heads.shape == (3, 2, 2, 7, 9)
    torch.testing.assert_close(out.weights, heads[:, -1].mean(1))  # last layer, head average
    pad = torch.arange(9) >= src_len[:, None]  # (B, S)
    assert (heads.permute(0, 4, 1, 2, 3)[pad] == 0).all()  # no head of any layer sees padding
    torch.testing.assert_close(heads.sum(-1), torch.ones(3, 2, 2, 7))


@pytest.mark.parametrize("kw", VARIANTS)
def test_parallel_forward_equals_step_by_step(kw) -> None:
    m = model(**kw)
    src, src_len, tgt = batch(1)
    seq2seq.steps_equal_forward(m, src, src_len, tgt, rtol=1e-4, atol=1e-5)
    with torch.no_grad():
        # greedy decoding picks the argmax of the teacher-forced logits of its own output
        dec = greedy(m, src, src_len, max_len=6)
        hyp = torch.tensor([[1, *(d + [2] * 6)[:5]] for d in dec.tokens])  # (B, 6)
        logits = m(src, src_len, hyp).logits  # (B, 6, V)
        logits[..., :2] = float("-inf")  # the decoder never emits pad (0) or bos (1)
        again = logits.argmax(-1)  # (B, 6)
    for b, toks in enumerate(dec.tokens):
        n = len(toks)
        assert again[b, :n].tolist() == toks


def test_decoder_is_causal_and_padding_changes_nothing() -> None:
    m = model()
    src, src_len, tgt = batch(2)
    with torch.no_grad():
        base = m(src, src_len, tgt).logits  # (B, T, V)
        for k in (0, 3, 6):
            changed = tgt.clone()
            changed[:, k] = (changed[:, k] + 1 - 3) % (V_TGT - 3) + 3
            logits = m(src, src_len, changed).logits
            torch.testing.assert_close(logits[:, :k], base[:, :k])  # earlier steps unchanged
            assert (logits[:, k:] - base[:, k:]).abs().amax() > 1e-4  # later ones do change
        # extra source padding leaves every logit unchanged
        wide = torch.cat([src, torch.zeros(3, 4, dtype=torch.long)], dim=1)  # (B, S + 4)
        torch.testing.assert_close(m(wide, src_len, tgt).logits, base, rtol=1e-4, atol=1e-5)


def test_sinusoids_match_the_formula() -> None:
    pe = sinusoids(50, 16).double()  # (T, D)
    pos, i = 37, 5
    torch.testing.assert_close(
        pe[pos, 2 * i].item(),
        torch.sin(torch.tensor(pos / 10000 ** (2 * i / 16))).item(),
        rtol=1e-5,
        atol=1e-6,
    )
    torch.testing.assert_close(
        pe[pos, 2 * i + 1].item(),
        torch.cos(torch.tensor(pos / 10000 ** (2 * i / 16))).item(),
        rtol=1e-5,
        atol=1e-6,
    )


def test_config_errors_say_what_to_do() -> None:
    with pytest.raises(ValueError, match="heads"):
        TransformerConfig(10, 10, dim=30, heads=4)
    with pytest.raises(ValueError, match="joint vocabulary"):
        TransformerConfig(10, 12, share="all")
    with pytest.raises(ValueError, match="'post' or 'pre'"):
        TransformerConfig(10, 10, norm="sandwich")


def test_training_lowers_the_loss_and_checkpoint_round_trips(tmp_path) -> None:
    run = seq2seq.train_toy_ko("transformer", tmp_path, epochs=3, lr=3e-3)
    losses, tv = run.losses, run.tgt_vocab
    assert losses == sorted(losses, reverse=True) and losses[-1] < 0.8 * run.before, losses
    loaded = seq2seq.reloads_to_the_same_logits(run, tmp_path)
    assert loaded.model_name == "transformer" and loaded.model.config == run.model.config
    shared = model(share="all", src_vocab=V_TGT)  # one embedding table: still saves flat
    joint = Vocab(tv.tokens[:V_TGT])  # one vocabulary for both sides, as share="all" needs
    checkpoint.save(tmp_path / "shared", shared, "transformer", joint, joint)
    again = checkpoint.load(tmp_path / "shared").model
    assert again.src_emb is None and torch.equal(again.tgt_emb.weight, shared.tgt_emb.weight)


def test_cli_trains_and_translates_with_options(tmp_path, capsys) -> None:
    options = {"norm": "pre", "share": "none"}
    seq2seq.trains_and_translates_from_the_cli("transformer", options, tmp_path / "run", capsys)


def test_every_dropout_runs_in_training_and_none_is_called_in_evaluation() -> None:
    """Vaswani 2017, §5.4: dropout on every sublayer output and on the embeddings + positions
    while training; evaluation (and p = 0) skips the modules, which changes nothing."""
    m = model(dropout=0.3)
    calls: dict[str, int] = {}
    for name, mod in m.named_modules():
        if isinstance(mod, torch.nn.Dropout):
            calls[name] = 0
            mod.register_forward_hook(
                lambda mod, i, o, name=name: calls.__setitem__(name, calls[name] + 1)
            )
    src, src_len, tgt = batch()
    m.train()
    torch.manual_seed(1)
    a = m(src, src_len, tgt).logits
    torch.manual_seed(2)
    b = m(src, src_len, tgt).logits
    assert not torch.allclose(a, b)  # two dropout draws
    assert calls and all(n > 0 for n in calls.values()), calls
    m.eval()
    for name in calls:
        calls[name] = 0
    torch.testing.assert_close(m(src, src_len, tgt).logits, m(src, src_len, tgt).logits)
    assert all(n == 0 for n in calls.values()), calls
