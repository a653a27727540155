"""Packed documents in the Transformer LM (``forward(..., documents=)``, ``--pack``): a packed
row trains as its documents would, each alone in a padded row; refusals in one line."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F

from attnkit.models.lm import (
    TransformerLM,
    TransformerLMConfig,
    TransformerXLConfig,
    document_positions,
    pack_refusal,
)

V = 11
DOCS = [[3, 4, 5, 6, 7, 8], [9, 2, 3], [4, 4, 5, 10, 2, 3, 7, 8], [5, 6], [2, 3, 4, 9]]
ROWS = [[0, 1, 3], [2, 4]]  # the documents of each packed row


def model(**options: object) -> TransformerLM:
    torch.manual_seed(0)
    c = TransformerLMConfig(src_vocab=V, tgt_vocab=V, dim=16, heads=2, layers=2, ff=32,
                            dropout=0.0, **options)  # type: ignore[arg-type]  # fmt: skip
    return TransformerLM(c).double()


def packed() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The documents packed in ROWS: inputs, targets, document ids (B, L), padding a
    document of its own after the last."""
    rows = [[(DOCS[d], i) for i, d in enumerate(row)] for row in ROWS]
    width = max(sum(len(doc) - 1 for doc, _ in row) for row in rows) + 2  # 2 of padding
    inputs = torch.zeros(len(rows), width, dtype=torch.long)
    targets = torch.zeros(len(rows), width, dtype=torch.long)
    docs = torch.zeros(len(rows), width, dtype=torch.long)
    for b, row in enumerate(rows):
        at = 0
        for doc, i in row:
            n = len(doc) - 1
            inputs[b, at : at + n] = torch.tensor(doc[:-1])
            targets[b, at : at + n] = torch.tensor(doc[1:])
            docs[b, at : at + n] = i
            at += n
        docs[b, at:] = len(row)
    return inputs, targets, docs


def unpacked() -> tuple[torch.Tensor, torch.Tensor]:
    """Each document alone in a row, padded with 0."""
    width = max(len(d) for d in DOCS) - 1
    inputs = torch.zeros(len(DOCS), width, dtype=torch.long)
    targets = torch.zeros(len(DOCS), width, dtype=torch.long)
    for b, doc in enumerate(DOCS):
        inputs[b, : len(doc) - 1], targets[b, : len(doc) - 1] = torch.tensor(doc[:-1]), \
            torch.tensor(doc[1:])  # fmt: skip
    return inputs, targets


def token_losses(m: TransformerLM, inputs: torch.Tensor, targets: torch.Tensor,
                 docs: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
    """Cross-entropy of every predicted token, in the order of DOCS."""
    logits = m(inputs, documents=docs).logits  # (B, L, V)
    nll = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")  # (B, L)
    return nll[targets != 0]


def per_document(losses: torch.Tensor, order: list[int]) -> list[torch.Tensor]:
    """Split token losses read in documents ``order`` into one tensor per document of DOCS."""
    parts = losses.split([len(DOCS[d]) - 1 for d in order])
    return [parts[order.index(d)] for d in range(len(DOCS))]


CASES = [
    {},  # sinusoidal positions added to the embeddings: restarted per document
    {"position": "rope"},
    {"position": "alibi"},
    {"position": "t5"},
    {"position": "shaw"},
    {"position": "xl"},
    {"align": "sliding-causal", "window": 3},
    {"align": "strided-causal", "stride": 3},
    {"align": "strided-causal-heads", "stride": 2},
    {"kv_heads": 1, "norm": "post"},
]


@pytest.mark.parametrize("options", CASES, ids=lambda o: "-".join(map(str, o.values())) or "sin")
def test_packed_loss_and_gradients_equal_unpacked(options: dict[str, object]) -> None:
    m = model(**options)
    order = [d for row in ROWS for d in row]
    p_in, p_tgt, docs = packed()
    p_losses = token_losses(m, p_in, p_tgt, docs)
    p_loss = p_losses.mean()  # the training loss: a mean over the predicted tokens
    p_grads = torch.autograd.grad(p_loss, list(m.parameters()), allow_unused=True)
    u_in, u_tgt = unpacked()
    u_losses = token_losses(m, u_in, u_tgt)
    u_loss = u_losses.mean()
    u_grads = torch.autograd.grad(u_loss, list(m.parameters()), allow_unused=True)
    for got, want in zip(per_document(p_losses, order), u_losses.split(
            [len(d) - 1 for d in DOCS]), strict=True):  # fmt: skip
        torch.testing.assert_close(got, want, rtol=0, atol=1e-10)
    assert abs(p_loss.item() - u_loss.item()) < 1e-10
    for (name, _), g, h in zip(m.named_parameters(), p_grads, u_grads, strict=True):
        if h is None:
            assert g is None or float(g.abs().max()) == 0, name
            continue
        torch.testing.assert_close(g, h, rtol=0, atol=1e-10, msg=name)


def test_without_documents_a_packed_row_differs() -> None:
    """The equality above is not trivial: read without the document mask and restarted
    positions, the same packed rows give other losses."""
    m = model().requires_grad_(False)
    p_in, p_tgt, docs = packed()
    assert abs(float(token_losses(m, p_in, p_tgt).mean())
               - float(token_losses(m, p_in, p_tgt, docs).mean())) > 1e-3  # fmt: skip


def test_sinusoid_positions_restart_per_document() -> None:
    """Only the restart makes sinusoidal packing equal: the mask alone leaves the documents
    after the first at shifted absolute positions."""
    m = model().requires_grad_(False)
    p_in, p_tgt, docs = packed()
    whole = m(p_in, documents=docs).logits
    m.embed = lambda ids, positions=None: TransformerLM.embed(m, ids)  # type: ignore[method-assign]
    shifted = m(p_in, documents=docs).logits
    first = docs == 0
    torch.testing.assert_close(whole[first], shifted[first], rtol=0, atol=1e-12)
    assert float((whole[~first] - shifted[~first]).abs().max()) > 1e-3


def test_document_positions() -> None:
    docs = torch.tensor([[0, 0, 0, 1, 1, 2, 2, 2], [0, 1, 1, 1, 1, 1, 2, 3]])
    want = torch.tensor([[0, 1, 2, 0, 1, 0, 1, 2], [0, 0, 1, 2, 3, 4, 0, 0]])
    assert torch.equal(document_positions(docs), want)


@pytest.mark.parametrize(
    ("docs", "says"),
    [
        (torch.zeros(2, 5, dtype=torch.long), "ids' shape (2, 6)"),
        (torch.zeros(2, 6), "integer document ids"),
        (torch.tensor([[0, 0, 1, 1, 0, 0], [0] * 6]), "non-decreasing"),
    ],
)
def test_bad_document_ids_are_one_line(docs: torch.Tensor, says: str) -> None:
    ids = torch.ones(2, 6, dtype=torch.long)
    with pytest.raises(ValueError, match=re.escape(says)) as e:
        model()(ids, documents=docs)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    ("config", "says"),
    [
        (TransformerXLConfig(V, V), "transformer-xl's memory"),
        (TransformerLMConfig(V, V, attention="linear"), "--attention softmax"),
        (TransformerLMConfig(V, V, attention="performer"), "--attention softmax"),
        (TransformerLMConfig(V, V, position="learned"), "learned positions"),
        (TransformerLMConfig(V, V, align="fixed-causal", stride=4), "absolute positions"),
    ],
)
def test_models_that_cannot_pack_are_refused(config: object, says: str) -> None:
    refusal = pack_refusal(config)  # type: ignore[arg-type]
    assert refusal is not None and says in refusal and "\n" not in refusal
    assert refusal.startswith("--pack: ")


def test_models_that_can_pack() -> None:
    for options in CASES:
        assert pack_refusal(TransformerLMConfig(V, V, **options)) is None  # type: ignore[arg-type]


def test_forward_refuses_documents_for_a_model_that_cannot_pack() -> None:
    m = model(attention="linear")
    ids = torch.ones(1, 4, dtype=torch.long)
    with pytest.raises(ValueError, match="--pack: attention='linear'"):
        m(ids, documents=torch.zeros(1, 4, dtype=torch.long))
