"""No host synchronisation on the hot path: a training step of every model, and the attention
modules, read no tensor value back to Python (``bool(t)``, ``t.item()``, ``t.tolist()``,
``int(t)``, ``float(t)``) under the default check level. On a GPU each such read waits for
the device; here they are counted on CPU with a TorchFunctionMode, which sees every one.

RNNsearch (and the other recurrent encoders) copy the lengths to the CPU once per batch for
sequence packing (``lengths.cpu()`` in ``encoders.run_packed``): the one device read allowed.
torch's packed GRU then reads the packed batch's ``batch_sizes``, which PyTorch always keeps
on the CPU (no device sync).
RNNsearch and Luong's soft training loss also packs the targets when they are on the CPU
(models/packed.py: the lengths read once, then packing's CPU-side batch sizes); where they are
not, it runs the padded loop, which reads nothing.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
from torch.overrides import TorchFunctionMode

import attnkit
import attnkit.nn as ann
from attnkit.data.batching import batches
from attnkit.data.tasks import TASKS, load_task
from attnkit.data.toy_ko import generate
from attnkit.data.vocab import Vocab
from attnkit.models import MODELS, build_model
from attnkit.models.latent import LatentSeq2Seq
from attnkit.tasks.registry import family, model_family
from attnkit.train.loop import loss_of

pytestmark = pytest.mark.usefixtures("one_thread_module")

ATTNKIT = str(Path(attnkit.__file__).parent)
READS = {
    torch.Tensor.__bool__: "bool",
    torch.Tensor.item: "item",
    torch.Tensor.tolist: "tolist",
    torch.Tensor.__int__: "int",
    torch.Tensor.__float__: "float",
    torch.Tensor.__index__: "index",
    torch.Tensor.cpu: "cpu",
}


class HostReads(TorchFunctionMode):
    """Records each read of a tensor's value by the host, with the attnkit line that did it."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[tuple[str, str]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if func in READS:
            ours = [f for f in traceback.extract_stack() if f.filename.startswith(ATTNKIT)]
            if ours:  # torch's own (Adam's CPU step counter) is not ours to count
                where = f"{Path(ours[-1].filename).name}:{ours[-1].lineno} {ours[-1].line}"
                self.reads.append((READS[func], where))
        return func(*args, **(kwargs or {}))


@contextmanager
def host_reads() -> Iterator[list[tuple[str, str]]]:
    mode = HostReads()
    with mode:
        yield mode.reads


def test_the_counter_sees_each_kind_of_read() -> None:
    """The spy itself: a read made through attnkit code is recorded (else zero proves nothing)."""
    with host_reads() as reads:
        attnkit.padding_mask(torch.tensor([2, 3]))  # one max() read, one check of the range
    assert [kind for kind, _ in reads] and all("masks.py" in where for _, where in reads)
    with host_reads() as reads, attnkit.checks("full"):
        attnkit.attend(torch.randn(1, 2, 4), torch.randn(1, 3, 4), torch.randn(1, 3, 4))
    assert [kind for kind, _ in reads].count("bool") >= 3  # query, keys, values, context


def one_batch(name: str):  # type: ignore[no-untyped-def]
    data = generate(24, seed=0)
    src_vocab = Vocab.build(e.src for e in data)
    tgt_vocab = Vocab.build(e.tgt for e in data)
    b = batches(data, src_vocab, tgt_vocab, 8)[-1]
    torch.manual_seed(0)
    model = build_model(name, src_vocab=len(src_vocab), tgt_vocab=len(tgt_vocab), preset="tiny")
    return model, b


TRANSLATION = sorted(m for m in MODELS if model_family(m) == "translate")
OTHERS = sorted(m for m in MODELS if model_family(m) != "translate")


def step_reads(model: torch.nn.Module, loss: Callable[[], torch.Tensor]) -> list[tuple[str, str]]:
    """The host reads of one training update (loss, backward, clipping, Adam)."""
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train()
    with host_reads() as reads:
        value = loss()
        opt.zero_grad(set_to_none=True)
        value.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return reads


def check_source_packing(name: str, packing: list[tuple[str, str]]) -> None:
    if name == "transformer":
        assert packing == []
    else:  # the lengths, copied once; the rest reads the packed batch's CPU-side batch_sizes
        assert [w for k, w in packing if "lengths.cpu()" in w] == [packing[0][1]]


@pytest.mark.parametrize("name", TRANSLATION)
def test_a_training_step_reads_nothing_back(name: str) -> None:
    model, b = one_batch(name)
    reads = step_reads(model, lambda: loss_of(model, b)[0])
    packing = [(k, w) for k, w in reads if "encoders.py" in w]
    targets = [(k, w) for k, w in reads if "packed.py" in w]
    assert [r for r in reads if r not in packing + targets] == [], f"{name}: {reads}"
    check_source_packing(name, packing)
    if isinstance(model, LatentSeq2Seq):  # targets on the CPU: packed (models/packed.py)
        lengths = [w for k, w in targets if "tgt_out != 0" in w]
        assert len(lengths) == 1 and lengths[0] == targets[0][1], reads  # read once, first
        rest = [w for k, w in targets[1:] if "batch_sizes" not in w and "pad_packed" not in w]
        assert rest == [], f"{name}: only packing's CPU-side batch sizes after: {rest}"
    else:
        assert targets == []


@pytest.mark.parametrize("name", ["rnnsearch", "luong"])
def test_the_padded_target_loop_reads_nothing_back(name: str) -> None:
    """``packed=False``, what the soft loss runs on targets off the CPU: no read of its own."""
    model, b = one_batch(name)
    loss = lambda: model.training_loss(b.src, b.src_len, b.tgt_in, b.tgt_out, packed=False)[0]  # noqa: E731
    reads = step_reads(model, loss)
    packing = [(k, w) for k, w in reads if "encoders.py" in w]
    assert [r for r in reads if r not in packing] == [], f"{name}: {reads}"
    check_source_packing(name, packing)


@pytest.mark.parametrize("name", OTHERS)
def test_a_training_step_of_the_other_families_reads_at_most_the_lengths(name: str) -> None:
    """Captioner, forecaster, HAN, digit-qa on a batch of their own task: the step reads
    nothing back but what sequence packing needs (the lengths, and packing's own CPU-side
    batch sizes). The Gumbel captioner reads its update count for the temperature, like the
    RNN models' Gumbel softness: not on this default (soft) path."""
    fam = family(model_family(name))
    task = next(t.name for t in TASKS.values() if t.family == fam.name)
    data = load_task(task, seed=0, train_size=16, valid_size=2, test_size=2).train
    src_vocab = Vocab.build(fam.tokens(e)[0] for e in data)
    tgt_vocab = Vocab.build(fam.tokens(e)[1] for e in data)
    b = fam.batches(data, src_vocab, tgt_vocab, 8, None)[-1]
    torch.manual_seed(0)
    model = build_model(name, src_vocab=len(src_vocab), tgt_vocab=len(tgt_vocab), preset="tiny")
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train()
    with host_reads() as reads:
        loss, _ = fam.loss_of(model, b, 0.0)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    # the lengths' one copy, and torch's packing reading its CPU-side batch sizes
    packing = ("pack_padded_sequence", "pad_packed_sequence", "lengths = ", "lengths.cpu()",
               "rnn(packed)")  # fmt: skip
    allowed = [(k, w) for k, w in reads if any(p in w for p in packing)]
    assert [r for r in reads if r not in allowed] == [], f"{name}: {reads}"


def test_the_attention_modules_read_nothing_back() -> None:
    torch.manual_seed(0)
    x, mem = torch.randn(2, 5, 8), torch.randn(2, 7, 8)
    pad = attnkit.padding_mask(torch.tensor([7, 3]), 7)  # (B, 1, S), built outside
    kpm = ~pad[:, 0]  # (B, S) PyTorch polarity
    modules = [
        lambda: attnkit.SelfAttention(8, 2, align=attnkit.CausalAlignment())(x),
        lambda: attnkit.CrossAttention(8, 2)(x, mem, mask=pad, need_weights=False),
        lambda: attnkit.CrossAttention(8, 2)(x, mem, mask=pad),
        lambda: ann.MultiheadAttention(8, 2, batch_first=True)(x, mem, mem, key_padding_mask=kpm),
        lambda: attnkit.Attention(attnkit.AdditiveScore(8, 8, 8))(x, mem, mask=pad),
        lambda: attnkit.attend(x, mem, mem, align=attnkit.SlidingWindow(2), need_weights=False),
    ]
    for i, call in enumerate(modules):
        with host_reads() as reads:
            call()
        assert reads == [], f"module {i}: {reads}"
