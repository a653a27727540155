"""The "docs" task family (attnkit.tasks.family): documents -> a label, for the hierarchical
attention network (models/han.py). Source tokens are the words of a document, the target
"token" its label (so the target vocabulary is the label set, after the four specials).

Evaluation: accuracy, and for documents that know their key sentence (generated ones) the
fraction whose sentence attention peaks on it (``key_peak``; models that pool by mean or max
have no sentence attention, and no such number).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..data.batching import TensorBatch
from ..data.docs import Doc
from ..data.vocab import SPECIALS, Vocab
from ..models.han import sentence_peaks
from .family import Family, device_of


@dataclass
class DocBatch(TensorBatch):
    words: Tensor  # (B, S, T) word ids, 0 = padding
    labels: Tensor  # (B,) class ids (target vocabulary)
    keys: Tensor  # (B,) key sentence, -1 when unknown
    index: list[int]

    @property
    def tokens(self) -> int:
        return len(self.index)  # the loss is a mean over documents


def encode(docs: Sequence[Doc], src_vocab: Vocab, tgt_vocab: Vocab, index: list[int]) -> DocBatch:
    """Documents as a padded (B, S, T) tensor of word ids; labels as target-vocabulary ids."""
    s = max(len(d.sentences) for d in docs)
    t = max(len(x) for d in docs for x in d.sentences)
    words = torch.zeros(len(docs), s, t, dtype=torch.long)  # (B, S, T)
    for b, d in enumerate(docs):
        for i, sentence in enumerate(d.sentences):
            ids = src_vocab.encode(sentence, eos=False)
            words[b, i, : len(ids)] = torch.tensor(ids)
    labels = torch.tensor([tgt_vocab.index.get(d.label, tgt_vocab.unk_id) for d in docs])
    keys = torch.tensor([d.key for d in docs])
    return DocBatch(words, labels, keys, index)


def batches(
    examples: Sequence[Doc], src_vocab: Vocab, tgt_vocab: Vocab, size: int,
    rng: random.Random | None,
) -> list[DocBatch]:  # fmt: skip
    order = list(range(len(examples)))
    if rng is not None:
        rng.shuffle(order)
    chunks = [order[i : i + size] for i in range(0, len(order), size)]
    return [encode([examples[j] for j in c], src_vocab, tgt_vocab, c) for c in chunks]



def loss_of(model: nn.Module, b: DocBatch, label_smoothing: float) -> tuple[Tensor, Any]:
    """Negative log-likelihood of the right labels (Yang 2016, eq. 12), mean over documents."""
    b = b.to(device_of(model))
    out = model(b.words)
    return F.cross_entropy(out.logits, b.labels, label_smoothing=label_smoothing), out


def eval_loss(model: nn.Module, b: DocBatch) -> tuple[float, int]:
    b = b.to(device_of(model))
    return float(F.cross_entropy(model(b.words).logits, b.labels, reduction="sum")), len(b.index)


def predict(logits: Tensor) -> Tensor:
    """The predicted label of each document: argmax over the labels, never a special symbol
    (pad, bos, eos, unk: the first ids of the target vocabulary). logits (B, C) -> (B,)"""
    return logits[:, len(SPECIALS) :].argmax(-1) + len(SPECIALS)


@torch.no_grad()
def measure(
    model: nn.Module, docs: Sequence[Doc], src_vocab: Vocab, tgt_vocab: Vocab
) -> dict[str, float]:  # noqa: E501
    """{"accuracy", and "key_peak" when measurable}: the fraction of documents classified
    right, and of documents with a known key sentence whose sentence attention peaks on it."""
    was = model.training
    model.eval()
    right, peaks, keyed = 0, 0, 0
    for b in batches(docs, src_vocab, tgt_vocab, 256, None):
        b = b.to(device_of(model))
        out = model(b.words)
        right += int((predict(out.logits) == b.labels).sum())
        w = out.hierarchy.sentence_weights
        known = b.keys >= 0  # (B,)
        if w is not None and bool(known.any()):
            peaks += int((sentence_peaks(w) == b.keys)[known].sum())
            keyed += int(known.sum())
    model.train(was)
    scores = {"accuracy": right / max(len(docs), 1)}
    return scores | ({"key_peak": peaks / keyed} if keyed else {})


def score(model: nn.Module, docs: list[Doc], src_vocab: Vocab, tgt_vocab: Vocab) -> float | None:
    return measure(model, docs, src_vocab, tgt_vocab)["accuracy"] if docs else None


def evaluate(loaded: Any, docs: list[Doc]) -> dict[str, float]:
    return measure(loaded.model, docs, loaded.src_vocab, loaded.tgt_vocab)


def show(loaded: Any, docs: list[Doc], index: int, out: str | None, png: str | None) -> list[str]:
    """Example ``index``: the predicted label, then its sentence bars beside its word heatmap
    (terminal lines; a page at ``out``; a PNG at ``png``)."""
    from ..viz.hierarchy import hierarchy_lines, write_page, write_png

    view = document_attention(loaded, docs[index])
    lines = hierarchy_lines(view)
    if out:
        lines.append(f"wrote {write_page(out, view)}")
    if png:
        lines.append(f"wrote {write_png(png, view)}")
    return lines


@torch.no_grad()
def document_attention(loaded: Any, doc: Doc) -> Any:
    """Run the checkpoint's model on ``doc``: its prediction and both levels' weights, as an
    ``attnkit.viz.hierarchy.DocView``."""
    from ..viz.hierarchy import DocView, scalar_weights

    model = loaded.model
    if getattr(model.config, "pool", "attention") in ("mean", "max"):
        raise ValueError(
            f"this model pools by {model.config.pool}: it has no attention weights to show "
            "(train one with --opt pool=attention or pool=multidim)"
        )
    model.eval()
    b = encode([doc], loaded.src_vocab, loaded.tgt_vocab, [0])
    out = model(b.words.to(device_of(model)))
    tree = out.hierarchy
    assert tree.word_weights is not None and tree.sentence_weights is not None
    features = tree.sentence_weights.dim() == 3
    words = scalar_weights(tree.word_weights[0], features).cpu()  # (S, T)
    sents = scalar_weights(tree.sentence_weights[0], features).cpu()  # (S,)
    predicted = loaded.tgt_vocab.tokens[int(predict(out.logits)[0])]
    return DocView(
        sentences=[list(s) for s in doc.sentences],
        word_weights=[words[i, : len(s)].tolist() for i, s in enumerate(doc.sentences)],
        sentence_weights=sents[: len(doc.sentences)].tolist(),
        key=doc.key,
        label=doc.label,
        predicted=predicted,
        title=f"{loaded.model_name} ({model.config.pool} pooling): label {doc.label}, "
        f"predicted {predicted}",
    )



DOCS = Family(
    name="docs",
    tokens=lambda d: (d.words, (d.label,)),
    batches=batches,
    loss_of=loss_of,
    eval_loss=eval_loss,
    score=score,
    score_name="accuracy",
    evaluate=evaluate,
    show=show,
    default_model="han",
)

__all__ = ["DOCS", "DocBatch", "batches", "encode", "evaluate", "measure", "predict"]
