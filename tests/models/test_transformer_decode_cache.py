"""The Transformer's decoding cache: the encoder memory is projected once per sentence batch
(not at every step), each step projects one new row, and decoding gives what the
teacher-forced pass gives."""

import pytest
import torch

from attnkit.decode.search import beam_search, greedy
from attnkit.models import build_model

pytestmark = pytest.mark.usefixtures("one_thread_module")


def test_each_projection_sees_each_row_once() -> None:
    torch.manual_seed(0)
    m = build_model("transformer", src_vocab=20, tgt_vocab=20, preset="tiny").eval()
    rows: dict[str, list[int]] = {"cross_k": [], "self_k": []}
    layer = m.dec[0]
    layer.cross_attn.k_proj.register_forward_hook(
        lambda mod, inp, out: rows["cross_k"].append(inp[0].shape[:2].numel())
    )
    layer.self_attn.k_proj.register_forward_hook(
        lambda mod, inp, out: rows["self_k"].append(inp[0].shape[:2].numel())
    )
    src, src_len = torch.randint(3, 20, (2, 6)), torch.tensor([6, 4])
    dec = greedy(m, src, src_len, max_len=7)
    assert rows["cross_k"] == [2 * 6]  # the memory: once, for the whole decode
    steps = len(rows["self_k"])
    assert steps >= 1 and rows["self_k"] == [2] * steps  # one new row per sentence per step
    rows["cross_k"].clear()
    beam_search(m, src, src_len, beam=3, max_len=7)
    assert rows["cross_k"] == [2 * 6]  # projected before the beams are made
    assert len(dec.tokens) == 2


def test_step_logits_equal_the_teacher_forced_pass_over_a_beam() -> None:
    """Reordered caches (beam search's select) stay aligned with their hypotheses."""
    torch.manual_seed(1)
    m = build_model("transformer", src_vocab=20, tgt_vocab=20, preset="tiny").eval()
    src, src_len = torch.randint(3, 20, (2, 5)), torch.tensor([5, 3])
    out = beam_search(m, src, src_len, beam=3, max_len=6)
    with torch.no_grad():
        for b, toks in enumerate(out.tokens):
            ended = len(toks) < 6  # else it ran to max_len without eos
            ys = torch.tensor([[1, *toks]])  # (1, T) bos + hypothesis
            logits = m(src[b : b + 1], src_len[b : b + 1], ys).logits.float()  # (1, T, V)
            logits[..., :2] = float("-inf")  # pad and bos are never generated
            logp = logits.log_softmax(-1)[0]  # (T, V)
            wanted = [*toks, 2] if ended else toks  # eos (id 2) ends a finished one
            total = sum(float(logp[t, y]) for t, y in enumerate(wanted))
            assert out.scores[b] == pytest.approx(total / len(wanted), rel=1e-4, abs=1e-5)
