"""The softness registry (models/softness.py): one object per name, the capabilities the
models ask of it, a one-line error naming the choices, and no softness name compared outside
the registry module."""

import re
from pathlib import Path

import pytest

from attnkit.models import build_model
from attnkit.models.caption_softness import SOFTNESS as CAPTION_SOFTNESS
from attnkit.models.latent import SOFTNESS
from attnkit.models.softness import REGISTRY, resolve, softness_of, uniform
from attnkit.stages.normalisers import softmax

SRC = Path(__file__).resolve().parents[2] / "src" / "attnkit"


def test_the_registry_holds_each_name_once_and_each_object_knows_its_name() -> None:
    assert SOFTNESS == ("soft", "mean", "exact", "hard", "gumbel", "variational")
    assert CAPTION_SOFTNESS == ("soft", "mean", "hard", "gumbel", "variational")
    assert all(REGISTRY[n].name == n and resolve(n) is REGISTRY[n] for n in SOFTNESS)


def test_capabilities_as_the_papers_define_them() -> None:
    table = {n: {k for k in ("latent", "stochastic", "marginal", "posterior", "reinforce",
                             "samples", "tempered") if getattr(s, k)}
             for n, s in REGISTRY.items()}  # fmt: skip
    assert table == {
        "soft": set(),
        "mean": set(),
        "exact": {"latent", "marginal"},
        "hard": {"latent", "stochastic", "reinforce", "samples"},
        "gumbel": {"latent", "stochastic", "samples", "tempered"},
        "variational": {"latent", "stochastic", "marginal", "posterior"},
    }
    assert REGISTRY["mean"].normaliser is uniform
    assert all(REGISTRY[n].normaliser is softmax for n in SOFTNESS if n != "mean")
    assert [n for n, s in REGISTRY.items() if s.data_parallel] == ["soft"]
    assert [n for n, s in REGISTRY.items() if s.at_test is None] == ["soft"]


@pytest.mark.parametrize(
    "name,kw,owner,choices",
    [
        ("rnnsearch", {}, "RNNSearchConfig", SOFTNESS),
        ("captioner", {"src_vocab": 4}, "CaptionerConfig", CAPTION_SOFTNESS),
    ],
)
def test_an_unknown_softness_is_one_line_naming_the_choices(name, kw, owner, choices) -> None:
    with pytest.raises(ValueError) as e:
        build_model(name, preset="tiny", **{"src_vocab": 12, "tgt_vocab": 12, **kw},
                    softness="sparse")  # fmt: skip
    assert str(e.value) == f"{owner}.softness='sparse'; choose one of {', '.join(choices)}"
    with pytest.raises(ValueError, match="choose one of soft, mean, hard, gumbel, variational"):
        build_model("captioner", preset="tiny", src_vocab=4, tgt_vocab=12, softness="exact")


def test_a_model_resolves_its_softness_and_a_model_without_one_is_soft() -> None:
    m = build_model("luong", preset="tiny", src_vocab=12, tgt_vocab=12, softness="gumbel")
    assert m.config.resolved_softness is REGISTRY["gumbel"] is softness_of(m)
    t = build_model("transformer", preset="tiny", src_vocab=12, tgt_vocab=12)
    assert softness_of(t) is REGISTRY["soft"]


def test_no_softness_name_is_compared_outside_the_registry() -> None:
    # a softness field or variable compared, or a softness name compared to anything
    names = "|".join(SOFTNESS)
    compared = re.compile(rf"softness\w*\s*(==|!=|\bin\b)|(==|!=)\s*\"({names})\"")
    in_a_list = re.compile(r"\bin (STOCHASTIC|MARGINAL|PACKABLE|DETERMINISTIC)\b")
    found = []
    for path in SRC.rglob("*.py"):
        if path.relative_to(SRC).as_posix() == "models/softness.py":
            continue
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            named = "softness" in line.lower() and compared.search(line)
            if named or in_a_list.search(line):
                found.append(f"{path.relative_to(SRC)}:{i}: {line.strip()}")
    assert not found, found
