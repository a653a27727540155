"""On a GPU, a training step waits for the device only where it must: under
``torch.cuda.set_sync_debug_mode``, which reports every operation that blocks the host until
the GPU is done, the Transformer's whole update (forward, loss, backward, clipping, Adam) runs
with the mode at "error", and RNNsearch's only at the one copy the issue allows, its source
lengths to the CPU for sequence packing (``lengths.cpu()`` in ``encoders.run_packed``).
tests/test_host_syncs.py counts the same reads on the CPU, where every run can check them."""

from __future__ import annotations

import linecache
import warnings

import pytest
import torch

from attnkit.data.batching import batches
from attnkit.data.toy_ko import generate
from attnkit.data.vocab import Vocab
from attnkit.models import build_model
from attnkit.train.loop import loss_of

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="needs a CUDA device (torch.cuda.is_available() is False); "
    "tests/test_host_syncs.py counts host reads on the CPU",
)


def prepared(name: str):  # type: ignore[no-untyped-def]
    """A ``tiny`` model, its Adam and a toy-ko batch of 8, all on the GPU, after one update
    (CUDA context, kernels, allocator and Adam's state warm)."""
    data = generate(24, seed=0)
    src_vocab = Vocab.build(e.src for e in data)
    tgt_vocab = Vocab.build(e.tgt for e in data)
    b = batches(data, src_vocab, tgt_vocab, 8)[-1].to("cuda")  # copied before: data loading
    torch.manual_seed(0)
    model = build_model(name, src_vocab=len(src_vocab), tgt_vocab=len(tgt_vocab), preset="tiny")
    model = model.cuda().train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    update(model, opt, b)
    return model, opt, b


def update(model, opt, b) -> None:  # type: ignore[no-untyped-def]
    """One training update: forward, loss, backward, clipping, Adam."""
    loss, _ = loss_of(model, b)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()


def test_a_transformer_update_never_waits_for_the_gpu() -> None:
    parts = prepared("transformer")
    torch.cuda.set_sync_debug_mode("error")
    try:
        update(*parts)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()


def test_an_rnnsearch_update_waits_only_to_copy_the_source_lengths() -> None:
    parts = prepared("rnnsearch")
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            update(*parts)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    where = [f"{w.filename}:{w.lineno}" for w in seen if "synchroniz" in str(w.message)]
    print("\n".join(where))  # shown with pytest -s: the record of the run
    assert len(where) == 1, where
    file, line = where[0].rsplit(":", 1)
    assert file.endswith("encoders.py") and "lengths.cpu()" in linecache.getline(file, int(line))


def test_the_attention_paths_never_wait_for_the_gpu() -> None:
    """attend (scaled dot, additive), the sliding window (its band mask built on the device,
    not copied there per call) and attnkit.nn.MultiheadAttention, forward and backward, with
    padding masks, under the "error" mode."""
    import attnkit
    import attnkit.nn as ann
    from attnkit.local import sliding_window_attention
    from attnkit.stages.scores import AdditiveScore

    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 300, 16, device="cuda", requires_grad=True) for _ in range(3))
    keep = torch.arange(300, device="cuda")[None, None, None, :] < 250  # (1, 1, 1, Tk)
    mha = ann.MultiheadAttention(32, 4, batch_first=True).cuda()
    x = torch.randn(2, 7, 32, device="cuda", requires_grad=True)
    pad = torch.zeros(2, 7, dtype=torch.bool, device="cuda")
    pad[1, 5:] = True  # torch's polarity: True = padding
    additive = AdditiveScore(16, 16, 8).cuda()

    def run() -> None:
        a = sliding_window_attention(q, k, v, 32, mask=keep).context  # (2, 4, 300, 16)
        b = attnkit.attend(q, k, v, mask=keep).context
        c = attnkit.attend(q[:, :, :20], k[:, :, :30], v[:, :, :30], score=additive).context
        d = mha(x, x, x, key_padding_mask=pad)[0]
        (a.sum() + b.sum() + c.sum() + d.sum()).backward()

    run()  # warm
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        run()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
