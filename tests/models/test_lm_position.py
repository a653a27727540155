"""The vanilla Transformer LM's ``position`` option (models/lm.py): sinusoidal PE in the
embeddings by default, otherwise a position stage in every attention and no PE; learned
positions bounded by ``max_len``; names checked at construction."""

from __future__ import annotations

import math

import pytest
import torch

from attnkit.models import build_model
from attnkit.models.transformer import sinusoids
from attnkit.stages.position import ALiBi, LearnedPosition, RotaryPosition, T5Bias

V = 11


def lm(**kw):  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    sizes = dict(dim=16, heads=2, layers=2, ff=16, dropout=0.0) | kw
    return build_model("transformer-lm", src_vocab=4, tgt_vocab=V, **sizes).eval()


def test_sinusoidal_is_the_default_and_adds_pe_to_the_embeddings():
    model = lm()
    ids = torch.randint(1, V, (2, 7))
    expected = model.emb(ids) * math.sqrt(16) + sinusoids(7, 16, ids.device)
    assert torch.allclose(model.embed(ids), expected)
    assert all(layer.attn.position is None for layer in model.layers)


@pytest.mark.parametrize(("name", "stage"), [("alibi", ALiBi), ("rope", RotaryPosition),
                                             ("t5", T5Bias), ("learned", LearnedPosition)])
def test_a_position_stage_replaces_the_pe(name, stage):
    model = lm(position=name, max_len=8)
    ids = torch.randint(1, V, (2, 7))
    assert torch.allclose(model.embed(ids), model.emb(ids) * math.sqrt(16))  # no PE
    stages = [layer.attn.position for layer in model.layers]
    assert all(isinstance(s, stage) for s in stages)
    assert stages[0] is not stages[1]  # one stage per layer (own parameters)
    assert model(ids).logits.shape == (2, 7, V)


def test_t5_buckets_are_causal_in_a_language_model():
    assert not lm(position="t5").layers[0].attn.position.bidirectional


def test_alibi_makes_the_prediction_depend_on_the_order_of_the_keys():
    """One layer, no PE: the last query sees the same set of keys after a swap of the first
    two characters, so without a position its output is unchanged (the control: slopes
    zeroed); ALiBi's distance penalty makes it depend on the order."""
    torch.manual_seed(1)
    ids = torch.randint(1, V, (1, 6))
    swapped = ids[:, [1, 0, 2, 3, 4, 5]]
    model = lm(position="alibi", layers=1).double()
    a, b = model(ids).logits[0, -1], model(swapped).logits[0, -1]
    assert not torch.allclose(a, b, atol=1e-9)
    model.layers[0].attn.position.slopes.zero_()
    a, b = model(ids).logits[0, -1], model(swapped).logits[0, -1]
    assert torch.allclose(a, b, atol=1e-12)


def test_learned_positions_stop_at_max_len():
    model = lm(position="learned", max_len=8)
    model(torch.randint(1, V, (1, 8)))
    with pytest.raises(ValueError, match=r"learned positions are integers 0 \.\. 7"):
        model(torch.randint(1, V, (1, 9)))


def test_unknown_position_and_bad_max_len_are_errors():
    with pytest.raises(ValueError, match="position"):
        lm(position="nope")
    with pytest.raises(ValueError, match="max_len"):
        lm(position="learned", max_len=0)
