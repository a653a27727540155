"""Greedy and beam search on an untrained model: consistent with each other and with scores."""

import pytest
import torch

from attnkit.models import build_model
from attnkit.train.decode import beam_search, greedy


@pytest.fixture(autouse=True, scope="module")
def _one_thread():  # type: ignore[no-untyped-def]
    """Small recurrent models run far faster on one thread when the cores are shared."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def model_and_inputs():  # type: ignore[no-untyped-def]
    torch.manual_seed(1)
    model = build_model("rnnsearch", src_vocab=20, tgt_vocab=12, preset="tiny").eval()
    src = torch.randint(4, 20, (4, 6))
    src_len = torch.tensor([6, 3, 5, 2])
    for i, n in enumerate(src_len.tolist()):
        src[i, n:] = 0
    return model, src, src_len


def test_beam_of_one_is_greedy() -> None:
    model, src, src_len = model_and_inputs()
    g = greedy(model, src, src_len, max_len=8)
    b = beam_search(model, src, src_len, beam=1, length_penalty=0.0, max_len=8)
    assert g.tokens == b.tokens
    for wg, wb in zip(g.weights, b.weights, strict=True):
        assert wg is not None and wb is not None
        torch.testing.assert_close(wg, wb)


def test_beam_finds_at_least_the_greedy_log_probability() -> None:
    model, src, src_len = model_and_inputs()
    g = greedy(model, src, src_len, max_len=8)
    b = beam_search(model, src, src_len, beam=4, length_penalty=0.0, max_len=8)
    for sg, sb in zip(g.scores, b.scores, strict=True):
        assert sb >= sg - 1e-5


def test_weights_cover_the_real_source_only() -> None:
    model, src, src_len = model_and_inputs()
    d = beam_search(model, src, src_len, beam=3, max_len=8)
    for i, w in enumerate(d.weights):
        assert w is not None and w.shape == (min(len(d.tokens[i]) + 1, 8), int(src_len[i]))
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[0]))
