"""The Sparse Transformer's stride l is passed as ``stride=`` (Child et al. 2019 name it so)
wherever a pattern is built: ``build_alignment``, ``attnkit.build``, the language model's config
(and so ``attnkit train --opt stride=L``) and ``attnkit explain --stride L``. ``window=`` keeps
meaning a window or a sliding radius; given to a pattern it still works as the stride, with a
DeprecationWarning that says to pass ``stride=``."""

from __future__ import annotations

import warnings

import pytest
import torch

import attnkit
from attnkit.cli import main
from attnkit.models import build_model, parse_options
from attnkit.models.lm import TransformerLMConfig
from attnkit.registry import STRIDED, WINDOWED, build_alignment
from attnkit.stages.sparse import FactorisedAlignment, PatternSpec

PATTERN_NAMES = sorted(STRIDED)


@pytest.mark.parametrize("name", PATTERN_NAMES)
def test_stride_builds_the_pattern_and_window_still_does_with_a_warning(name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # stride= warns of nothing
        by_stride = build_alignment(name, 4, stride=3)
    assert isinstance(by_stride, FactorisedAlignment) and by_stride.spec.stride == 3
    with pytest.warns(DeprecationWarning, match=r"is its stride l: pass stride=3") as record:
        by_window = build_alignment(name, 4, window=3)
    assert record[0].filename == __file__  # the warning points at the caller's line
    assert isinstance(by_window, FactorisedAlignment) and by_window.spec == by_stride.spec
    assert by_stride.spec == PatternSpec(
        name.split("-")[0], 3, causal="-causal" in name, split_heads=name.endswith("-heads")
    )


def test_the_patterns_need_a_stride_and_only_they_take_one() -> None:
    assert set(STRIDED).isdisjoint(WINDOWED) and STRIDED
    with pytest.raises(ValueError, match="needs stride="):
        build_alignment("fixed-causal", 4)
    for name in sorted(WINDOWED):  # a window keeps its meaning, with no warning
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            build_alignment(name, 4, window=2)
        with pytest.raises(ValueError, match=rf"stride=2 is the stride l .* align={name!r}"):
            build_alignment(name, 4, stride=2)
    with pytest.raises(TypeError, match="pass stride= only"):
        build_alignment("strided", 4, window=2, stride=2)


def test_build_takes_stride_and_gives_the_same_module_as_the_old_window() -> None:
    x = torch.randn(2, 9, 8)
    torch.manual_seed(0)
    new = attnkit.build("scaled_dot", dim=8, heads=2, align="strided-causal-heads", stride=3)
    torch.manual_seed(0)
    with pytest.warns(DeprecationWarning, match="pass stride=3") as record:
        old = attnkit.build("scaled_dot", dim=8, heads=2, align="strided-causal-heads", window=3)
    assert len(record) == 1 and record[0].filename == __file__
    assert new.align.spec == old.align.spec and new.align.spec.stride == 3
    torch.testing.assert_close(new(x).context, old(x).context, rtol=0, atol=0)
    with pytest.raises(ValueError, match="stride=3 is the stride l"):
        attnkit.build("scaled_dot", dim=8, heads=2, align="sliding", stride=3)


def test_the_language_model_takes_stride_and_reads_an_old_window_as_it() -> None:
    sizes = dict(dim=8, heads=2, layers=1, ff=8)
    new = TransformerLMConfig(1, 9, align="fixed-causal", stride=4, **sizes)
    with pytest.warns(DeprecationWarning, match="pass stride=4"):
        old = TransformerLMConfig(1, 9, align="fixed-causal", window=4, **sizes)
    assert (old.stride, old.window) == (new.stride, new.window) == (4, 0)
    sliding = TransformerLMConfig(1, 9, align="sliding-causal", window=4, **sizes)
    assert (sliding.stride, sliding.window) == (0, 4)
    with pytest.raises(ValueError, match="stride=4 is the stride l"):
        TransformerLMConfig(1, 9, align="sliding-causal", stride=4, **sizes)


def test_train_opt_stride_reaches_the_models_pattern() -> None:
    """``attnkit train --model transformer-lm --opt align=strided-causal --opt stride=5``."""
    options = parse_options("transformer-lm", ["align=strided-causal", "stride=5"])
    model = build_model("transformer-lm", src_vocab=1, tgt_vocab=9, dim=8, heads=2, layers=1,
                        ff=8, **options)  # fmt: skip
    align = model.layers[0].attn.align
    assert isinstance(align, FactorisedAlignment) and align.spec.stride == 5


def test_explain_takes_stride(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "--align", "strided", "--stride", "2", "--src", "a b c d e"]) == 0
    assert "stride l = 2" in capsys.readouterr().out
