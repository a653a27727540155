"""The ``lm`` task family (attnkit.tasks.family): a text -> its next character, for the
decoder-only language models (models/lm.py: Transformer-XL and the vanilla Transformer LM).

Examples are the consecutive segments of a text (data/lm_text.py). A batch of B rows reads
B *streams*: the segments are dealt into B contiguous runs, and batch t holds segment t of
each run, so that row b of batch t + 1 continues row b of batch t and Transformer-XL's
memory (the detached hidden states of the previous segment, ``LMOutput.mems``) carries from
one batch to the next, in training as in evaluation (Dai et al. 2019, §3.2). The batches of
one ``batches`` call share a ``Carry`` that holds the memory between calls; the first batch
of the streams starts with none. Training batches are therefore never shuffled (segment
order is the recurrence, as in the authors' ordered iterator); a run resumed mid-epoch
starts its first batch without memory.

Metrics: the loss is cross-entropy in nats per character; ``attnkit evaluate`` reports
bits per character, bpc = nats / ln 2, and perplexity exp(nats), over the split's
characters (each but the first predicted once), read in as many streams as training's
batches had rows (each stream's first segment has no memory: fewer streams, more memory).

Legend: B streams (rows), L segment length, V vocabulary, N layers, M memory length.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..data.batching import TensorBatch
from ..data.lm_packed import PackedRows
from ..data.lm_text import Segment, Segments
from ..data.vocab import Vocab
from .family import Family, check_examples, device_of

EVAL_STREAMS = 16  # streams ``attnkit evaluate`` reads a split in, when no run says otherwise
READS = "a language model reads text (--task lm, --train-text FILE)"  # for check_examples


@dataclass
class Carry:
    """The memory that one batch leaves for the next batch of the same streams."""

    mems: list[Tensor] | None = None


@dataclass
class LMBatch(TensorBatch):
    inputs: Tensor  # (B, L) character ids, 0 = padding (a short last segment)
    targets: Tensor  # (B, L) the next character of each input, 0 = padding
    index: list[int]  # the segments of its rows
    first: bool  # the streams' first segments: no memory
    count: int  # characters predicted (targets that are not padding)
    carry: Carry = field(default_factory=Carry)
    docs: Tensor | None = None  # (B, L) packed rows (--pack): each position's document

    @property
    def tokens(self) -> int:
        return self.count  # the loss is a mean over predicted characters


def stream_rows(n: int, streams: int) -> Callable[[int], list[int]]:
    """Segments 0 .. n-1 dealt into ``streams`` contiguous runs (the first n mod streams runs
    one longer) -> batch t's rows: the segment of each run that has a t-th, so that row b of
    batch t + 1 is the segment after row b of batch t."""
    rows = max(1, min(streams, n))
    q, r = divmod(n, rows)
    starts = [b * q + min(b, r) for b in range(rows)]
    lengths = [q + (b < r) for b in range(rows)]
    return lambda t: [starts[b] + t for b in range(rows) if t < lengths[b]]


def stream_order(n: int, streams: int) -> list[list[int]]:
    """The rows of every batch of ``stream_rows``."""
    rows_of = stream_rows(n, streams)
    return [rows_of(t) for t in range(-(-n // max(1, min(streams, n))))]


def _batch(ids: list[Tensor], index: list[int], first: bool, carry: Carry) -> LMBatch:
    """Rows of ids, (L_b + 1,) each, as (B, L) inputs and targets padded with 0."""
    width = max(len(x) for x in ids) - 1
    inputs = torch.zeros(len(ids), width, dtype=torch.long)  # (B, L)
    targets = torch.zeros(len(ids), width, dtype=torch.long)  # (B, L)
    for b, x in enumerate(ids):
        inputs[b, : len(x) - 1], targets[b, : len(x) - 1] = x[:-1], x[1:]
    count = sum(len(x) - 1 for x in ids)
    return LMBatch(inputs, targets, index, first, count, carry)


def encode(segs: Sequence[Segment], vocab: Vocab, index: list[int], first: bool,
           carry: Carry) -> LMBatch:  # fmt: skip
    """Segments as (B, L) input and target ids, padded with 0 after a short segment."""
    return _batch([torch.tensor(vocab.encode(s.tokens, eos=False)) for s in segs], index, first,
                  carry)  # fmt: skip


class Batches(Sequence[LMBatch]):
    """The batches of ``batches``, each encoded when it is asked for: only one batch's ids
    are int64 at a time, whatever the length of the text."""

    def __init__(self, size: int, make: Callable[[int], LMBatch]) -> None:
        self.size, self.make = size, make

    def __len__(self) -> int:
        return self.size

    @overload
    def __getitem__(self, t: int) -> LMBatch: ...
    @overload
    def __getitem__(self, t: slice) -> list[LMBatch]: ...
    def __getitem__(self, t: int | slice) -> LMBatch | list[LMBatch]:
        if isinstance(t, slice):
            return [self[i] for i in range(*t.indices(self.size))]
        if not -self.size <= t < self.size:
            raise IndexError(f"batch {t} of {self.size}")
        return self.make(t % self.size)


def batches(
    examples: Sequence[Segment], src_vocab: Vocab, tgt_vocab: Vocab, size: int,
    rng: random.Random | None,
) -> Batches:  # fmt: skip
    """The segments in ``size`` streams (``stream_rows``); ``rng`` is not used: the order is
    the recurrence. The batches share one ``Carry``; each is encoded when asked for (from the
    ids of a text held as ``Segments``). Packed rows (``PackedRows``, ``--pack``) batch
    apart: ``packed_batches``."""
    if isinstance(examples, PackedRows):
        return packed_batches(examples, tgt_vocab, size, rng)
    carry = Carry()
    n = len(examples)
    rows_of = stream_rows(n, size)

    def make(t: int) -> LMBatch:
        rows = rows_of(t)
        if isinstance(examples, Segments):
            ids = [torch.from_numpy(examples.vocab_ids(i, tgt_vocab)) for i in rows]
            return _batch(ids, rows, t == 0, carry)
        return encode([examples[i] for i in rows], tgt_vocab, rows, t == 0, carry)

    return Batches(-(-n // max(1, min(size, n))), make)


def packed_batches(rows: PackedRows, vocab: Vocab, size: int, rng: random.Random | None
                   ) -> Batches:  # fmt: skip
    """Packed rows in batches of ``size``, shuffled by ``rng`` (no memory: any order), each
    with its document ids ``docs`` (B, L), padding a document of its own after the last."""
    order = list(range(len(rows)))
    if rng is not None:
        rng.shuffle(order)

    def make(t: int) -> LMBatch:
        index = order[t * size : (t + 1) * size]
        parts = [rows.row_ids(k, vocab) for k in index]  # (inputs, targets, docs) (W_b,) each
        width = max(len(p[0]) for p in parts)
        inputs = torch.zeros(len(parts), width, dtype=torch.long)  # (B, L)
        targets = torch.zeros(len(parts), width, dtype=torch.long)  # (B, L)
        docs = torch.zeros(len(parts), width, dtype=torch.long)  # (B, L)
        for b, (x, y, d) in enumerate(parts):
            n = len(x)
            inputs[b, :n], targets[b, :n] = torch.from_numpy(x), torch.from_numpy(y)
            docs[b, :n], docs[b, n:] = torch.from_numpy(d), int(d[-1]) + 1
        count = sum(len(p[0]) for p in parts)
        return LMBatch(inputs, targets, index, True, count, Carry(), docs)

    return Batches(-(-len(rows) // size), make)


def run(model: nn.Module, b: LMBatch, memory: int | None = None) -> Any:
    """The model on batch ``b`` with the memory its streams' previous batch left (none for
    the first), which it replaces by the new one -> the model's ``LMOutput``."""
    b = b.to(device_of(model))
    mems = None if b.first else b.carry.mems
    if mems is not None:  # streams that ended drop out from the last rows
        mems = [m[: b.inputs.shape[0]] for m in mems]
    if b.docs is not None:  # packed documents: no memory
        out = model(b.inputs, documents=b.docs)
    else:
        out = model(b.inputs, mems) if memory is None else model(b.inputs, mems, memory=memory)
    b.carry.mems = out.mems  # detached by the model: no gradient crosses segments
    return out


def _nll(out: Any, b: LMBatch, reduction: str, label_smoothing: float = 0.0) -> Tensor:
    targets = b.targets.to(out.logits.device)
    return F.cross_entropy(out.logits.flatten(0, 1), targets.flatten(), ignore_index=0,
                           reduction=reduction, label_smoothing=label_smoothing)  # fmt: skip


def loss_of(model: nn.Module, b: LMBatch, label_smoothing: float = 0.0) -> tuple[Tensor, Any]:
    """Mean cross-entropy of the next character, −(1/N) Σ log p(x_t+1 | x_≤t, memory)."""
    out = run(model, b)
    return _nll(out, b, "mean", label_smoothing), out


def eval_loss(model: nn.Module, b: LMBatch) -> tuple[float, int]:
    return float(_nll(run(model, b), b, "sum")), b.count


@torch.no_grad()
def text_nll(
    model: nn.Module, segs: Sequence[Segment], vocab: Vocab, streams: int = EVAL_STREAMS,
    memory: int | None = None,
) -> tuple[float, int]:  # fmt: skip
    """Summed negative log-likelihood (nats) of the segments' characters, read in
    ``streams`` streams with the memory carried (``memory`` overrides the model's length),
    and the number of characters predicted."""
    was = model.training
    model.eval()
    total, count = 0.0, 0
    for b in batches(segs, vocab, vocab, streams, None):
        total += float(_nll(run(model, b, memory), b, "sum"))
        count += b.count
    model.train(was)
    return total, count


@torch.no_grad()
def window_bits(model: nn.Module, ids: Tensor, length: int, block: int, batch: int = 4096
                ) -> list[float]:  # fmt: skip
    """The non-overlapping evaluation at input length ``length`` (Press et al. 2022, §2:
    the text cut into consecutive windows of L_valid characters, each read from scratch, no
    memory): ids (N,) -> bits per character of each block of ``block`` predicted characters,
    block b predicting characters b·block + 1 .. (b + 1)·block (whole blocks only). With
    ``block`` a multiple of every evaluated length, the blocks hold the same characters at
    every length: only the context each character is predicted from changes."""
    if length < 1 or block % length:
        raise ValueError(f"block={block} must be a multiple of the window length {length} >= 1")
    blocks = (ids.shape[0] - 1) // block
    if blocks < 1:
        raise ValueError(f"{ids.shape[0]} characters hold no block of {block} + 1; "
                         "give a longer text or a shorter block")  # fmt: skip
    was = model.training
    model.eval()
    inputs = ids[: blocks * block].view(-1, length)  # (W, L_valid) windows
    targets = ids[1 : blocks * block + 1].view(-1, length)  # (W, L_valid)
    rows = max(1, batch // length)
    nats = torch.cat([
        F.cross_entropy(model(inputs[s : s + rows]).logits.transpose(1, 2),
                        targets[s : s + rows], reduction="none")  # (W', L_valid)
        for s in range(0, inputs.shape[0], rows)
    ])  # fmt: skip
    model.train(was)
    per_block = nats.reshape(blocks, block).double().mean(dim=1) / math.log(2)  # (blocks,)
    return [float(x) for x in per_block]


def unigram_bits(train: str, test: str) -> float:
    """Bits per character of the test text under the training text's character frequencies
    (add-one smoothed): what a model that learned no context reaches."""
    counts: dict[str, int] = {}
    for c in train:
        counts[c] = counts.get(c, 0) + 1
    total = len(train) + len(counts) + 1
    return sum(-math.log2((counts.get(c, 0) + 1) / total) for c in test[1:]) / (len(test) - 1)


def evaluate(loaded: Any, segs: list[Segment]) -> dict[str, float]:
    """Bits per character and perplexity of the split, memory carried across segments, read
    in as many streams as the run's batches had rows (so that the validation split scores
    as it did in training)."""
    if not segs:
        raise ValueError("no text to score")
    if not isinstance(segs, Segments):  # a text's segments are Segments by construction
        check_examples(segs, Segment, READS)
    streams = int((getattr(loaded, "meta", None) or {}).get("train", {}).get("batch_size")
                  or EVAL_STREAMS)  # fmt: skip
    nats, count = text_nll(loaded.model, segs, loaded.tgt_vocab, streams)
    per = nats / count
    return {"bpc": per / math.log(2), "perplexity": math.exp(per), "nll": per,
            "characters": float(count)}  # fmt: skip


def shown(char: str) -> str:
    """A character as a readable label: a space as ␣, a newline as ↵, a tab as ⇥."""
    return {" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"}.get(char, char)


@torch.no_grad()
def segment_attention(loaded: Any, segs: Sequence[Segment], index: int
                      ) -> tuple[Tensor, list[str], list[str]]:  # fmt: skip
    """Segment ``index`` read after the ⌈M / L⌉ segments before it (a stream started there
    builds its memory): weights (N, H, L, M' + L), the query labels (its input characters)
    and the key labels: memory keys "m0:c" .. (oldest first), then the segment's characters."""
    model = loaded.model
    model.eval()
    seg = segs[index]
    length = max(len(seg.tokens) - 1, 1)
    memory = int(getattr(model.config, "memory", 0))
    before = list(segs[max(0, index - math.ceil(memory / length)) : index]) if memory else []
    carry = Carry()
    for t, s in enumerate(before):
        run(model, encode([s], loaded.tgt_vocab, [t], t == 0, carry))
    b = encode([seg], loaded.tgt_vocab, [index], not before, carry).to(device_of(model))
    mems = None if b.first else carry.mems
    out = model(b.inputs, mems, need_weights=True)
    weights = torch.stack([w[0] for w in out.weights])  # (N, H, L, M' + L)
    kept = weights.shape[-1] - b.inputs.shape[1]  # M'
    past = [c for s in before for c in s.tokens[:-1]]  # the inputs before, oldest first
    past = past[len(past) - kept :]  # the M' the memory kept
    keys = [f"m{j}:{shown(c)}" for j, c in enumerate(past)]
    queries = [shown(c) for c in seg.tokens[:-1]]
    return weights, queries, keys + queries


def show(
    loaded: Any, segs: list[Segment], index: int, out: str | None, png: str | None
) -> list[str]:
    """The attention of segment ``index`` over its memory and itself: a page (``out``), a
    PNG, or a terminal heatmap (the last layer, mean over heads)."""
    from ..viz.outputs import show as show_map

    check_examples(segs[index : index + 1], Segment, READS)
    weights, queries, keys = segment_attention(loaded, segs, index)
    memory = len(keys) - len(queries)
    title = f"{loaded.model_name}: segment {index} (characters {segs[index].start}..)"
    head = (f"{title}: {len(queries)} queries over {memory} memory keys"
            + (f" (m0 .. m{memory - 1}, oldest first)" if memory else "")
            + f" and the segment's {len(queries)} keys")  # fmt: skip
    lines = show_map(weights.double().cpu().numpy(), queries, keys, page_path=out,
                     png_path=png, terminal=not (out or png), title=title)  # fmt: skip
    return [head, *lines]


LM = Family(
    name="lm",
    tokens=lambda e: ((), e.tokens),
    batches=batches,
    loss_of=loss_of,
    eval_loss=eval_loss,
    score=lambda model, examples, src_vocab, tgt_vocab: None,  # bpc is for `evaluate`
    score_name="none",
    evaluate=evaluate,
    show=show,
    default_model="transformer-xl",
)

__all__ = [
    "LM",
    "Batches",
    "Carry",
    "LMBatch",
    "batches",
    "encode",
    "evaluate",
    "packed_batches",
    "run",
    "segment_attention",
    "show",
    "stream_order",
    "stream_rows",
    "text_nll",
    "unigram_bits",
    "window_bits",
]
