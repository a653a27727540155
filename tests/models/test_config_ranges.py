"""Every model config rejects out-of-range sizes and dropout through one helper, with an error
that names the class, the field and the rule."""

from dataclasses import dataclass, replace

import pytest

from attnkit._checks import check_ranges
from attnkit.models import MODELS, make_config

SIZES = {
    "rnnsearch": ("src_vocab", "tgt_vocab", "emb", "enc_hidden", "dec_hidden", "attn_hidden"),
    "rnnencdec": ("src_vocab", "tgt_vocab", "emb", "enc_hidden", "dec_hidden", "context"),
    "transformer": ("src_vocab", "tgt_vocab", "dim", "enc_layers", "dec_layers", "ff", "max_len"),
    "luong": ("src_vocab", "tgt_vocab", "emb", "hidden", "layers", "max_src_len"),
    "han": ("src_vocab", "tgt_vocab", "emb", "hidden", "attn"),
    "digit-qa": ("src_vocab", "tgt_vocab", "dim", "hidden", "channels", "max_grid"),
    "forecaster": ("src_vocab", "tgt_vocab", "hidden"),
    "captioner": ("src_vocab", "tgt_vocab", "channels", "feat", "emb", "dec_hidden"),
    "transformer-xl": ("src_vocab", "tgt_vocab", "dim", "layers", "ff"),
    "transformer-lm": ("src_vocab", "tgt_vocab", "dim", "layers", "ff"),
}


def test_every_model_is_covered() -> None:
    assert set(SIZES) == set(MODELS)


@pytest.mark.parametrize(("model", "field"), [(m, f) for m, fs in SIZES.items() for f in fs])
def test_sizes_must_be_at_least_one(model: str, field: str) -> None:
    cfg = make_config(model, preset="tiny", src_vocab=10, tgt_vocab=10)
    with pytest.raises(ValueError, match=rf"^{type(cfg).__name__}\.{field}=0; it must be >= 1$"):
        replace(cfg, **{field: 0})


@pytest.mark.parametrize("model", sorted(SIZES))
@pytest.mark.parametrize("dropout", [-0.1, 1.0])
def test_dropout_must_be_in_zero_one(model: str, dropout: float) -> None:
    cfg = make_config(model, preset="tiny", src_vocab=10, tgt_vocab=10)
    replace(cfg, dropout=0.0)
    replace(cfg, dropout=0.99)
    with pytest.raises(ValueError, match=r"dropout=.*it must be in \[0, 1\)"):
        replace(cfg, dropout=dropout)


@pytest.mark.parametrize("model", ["rnnsearch", "rnnencdec"])
def test_maxout_zero_disables_it_and_negative_is_an_error(model: str) -> None:
    cfg = make_config(model, preset="tiny", src_vocab=10, tgt_vocab=10)
    replace(cfg, maxout=0)
    with pytest.raises(ValueError, match="maxout=-1; it must be >= 0"):
        replace(cfg, maxout=-1)


@dataclass
class Toy:
    n: int = 1
    k: int = 0
    p: float = 0.0


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"n": 0}, "Toy.n=0; it must be >= 1"),
        ({"k": -1}, "Toy.k=-1; it must be >= 0"),
        ({"p": 1.0}, r"Toy.p=1.0; it must be in \[0, 1\)"),
        ({"p": -0.5}, r"Toy.p=-0.5; it must be in \[0, 1\)"),
    ],
)
def test_check_ranges_at_the_edges(values: dict[str, float], message: str) -> None:
    check_ranges(Toy(n=1, k=0, p=0.0), positive=("n",), non_negative=("k",), fractions=("p",))
    with pytest.raises(ValueError, match=message):
        check_ranges(Toy(**values), positive=("n",), non_negative=("k",), fractions=("p",))
