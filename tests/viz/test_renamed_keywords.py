"""One spelling across the viz functions (query tokens, then key tokens; ``query_tokens``,
``key_tokens``, ``heads``, ``*path``): the old keywords of ``show``, ``terminal_heatmap`` and
``save_attention`` still work for one release, give the same result, and warn with the new
name; old and new together are refused."""

from __future__ import annotations

import inspect
import warnings

import pytest
import torch

from attnkit import viz

Q, K = ["a", "b", "c"], ["w", "x", "y", "z"]


def _weights() -> torch.Tensor:
    return torch.softmax(torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(0)), -1)


def test_the_public_viz_functions_share_one_order_and_one_spelling() -> None:
    for fn in (viz.show, viz.heatmap, viz.terminal_heatmap, viz.attention_page,
               viz.write_attention_page, viz.save_attention):  # fmt: skip
        names = list(inspect.signature(fn).parameters)
        assert names.index("query_tokens") + 1 == names.index("key_tokens"), fn.__name__
        assert not {"tgt_tokens", "src_tokens", "head", "out", "png"} & set(names), fn.__name__


def test_show_takes_its_old_keywords_with_a_warning(tmp_path) -> None:
    w = _weights()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new spelling warns of nothing
        new = viz.show(w, query_tokens=Q, key_tokens=K, page_path=tmp_path / "new.html",
                       png_path=tmp_path / "new.png", terminal=True, heads=1)  # fmt: skip
    with pytest.warns(DeprecationWarning) as caught:
        old = viz.show(w, tgt_tokens=Q, src_tokens=K, out=tmp_path / "old.html",
                       png=tmp_path / "old.png", terminal=True, head=1)  # fmt: skip
    said = " ".join(str(c.message) for c in caught)
    for old_kw, new_kw in [("tgt_tokens", "query_tokens"), ("src_tokens", "key_tokens"),
                           ("out", "page_path"), ("png", "png_path"), ("head", "heads")]:
        assert f"show({old_kw}=...) is now show({new_kw}=...)" in said
    assert new[-1] == old[-1]  # the same terminal heatmap
    assert (tmp_path / "new.html").read_text() == (tmp_path / "old.html").read_text()
    assert (tmp_path / "old.png").stat().st_size > 0


def test_terminal_heatmap_and_save_attention_take_their_old_keywords(tmp_path) -> None:
    w = _weights()
    with pytest.warns(DeprecationWarning, match=r"terminal_heatmap\(head=\.\.\.\)"):
        old = viz.terminal_heatmap(w, Q, K, head=1)
    assert old == viz.terminal_heatmap(w, Q, K, heads=1) != viz.terminal_heatmap(w, Q, K)
    with pytest.warns(DeprecationWarning) as caught:
        path = viz.save_attention(tmp_path / "w.safetensors", w, tgt_tokens=Q, src_tokens=K)
    assert {str(c.message).split(" is now")[0] for c in caught} == {
        "save_attention(tgt_tokens=...)", "save_attention(src_tokens=...)"}
    record = viz.load_attention(path)
    assert (record.tgt_tokens, record.src_tokens) == (Q, K)


def test_old_and_new_keyword_together_is_refused() -> None:
    with pytest.raises(TypeError, match=r"head= and heads=; pass heads= only"):
        viz.terminal_heatmap(_weights(), Q, K, head=0, heads=1)
