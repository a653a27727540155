"""Learning-rate warm-up (Vaswani 2017, eq. 3), label smoothing, and sacreBLEU on
detokenised subword output."""

import math

import pytest
import sacrebleu
import torch

from attnkit.data.example import Example
from attnkit.data.tokenisers import train_spm
from attnkit.eval.text import score
from attnkit.train.loop import TrainConfig


def test_warmup_is_vaswanis_schedule_with_the_peak_given() -> None:
    d, warmup = 512, 4000

    def noam(step: int) -> float:  # Vaswani 2017, eq. 3
        return d**-0.5 * min(step**-0.5, step * warmup**-1.5)

    cfg = TrainConfig(lr=noam(warmup), warmup=warmup)
    for step in (1, 10, 1000, 3999, 4000, 4001, 10_000, 100_000):
        assert cfg.lr_at(step) == pytest.approx(noam(step), rel=1e-12)
    assert TrainConfig(lr=3e-4).lr_at(7) == 3e-4  # no warm-up: constant


def test_bad_schedule_options_are_refused() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        TrainConfig(warmup=-1)
    with pytest.raises(ValueError, match=r"label_smoothing=1.0; it must be in \[0, 1\)"):
        TrainConfig(label_smoothing=1.0)
    with pytest.raises(ValueError, match="valid_decode"):
        TrainConfig(valid_decode=-2)


def test_label_smoothed_loss_matches_its_definition() -> None:
    """Szegedy 2016: q' = (1 - eps) one_hot(y) + eps / V; loss = -sum q' log p (pad ignored)."""
    from attnkit.data.batching import Batch
    from attnkit.models import Seq2SeqOutput
    from attnkit.train.loop import loss_of

    torch.manual_seed(0)
    B, T, V, eps = 3, 4, 7, 0.1
    logits = torch.randn(B, T, V, dtype=torch.float64)
    tgt = torch.randint(1, V, (B, T))
    tgt[0, 3] = 0  # padding

    class Fixed(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(()))

        def forward(self, *_):  # noqa: ANN002
            return Seq2SeqOutput(logits=logits, weights=None)

    b = Batch(tgt, torch.full((B,), T), tgt, tgt, list(range(B)))
    got = loss_of(Fixed(), b, eps)[0]  # type: ignore[arg-type]
    logp = logits.log_softmax(-1)
    rows = [
        -(1 - eps) * logp[i, t, tgt[i, t]] - eps / V * logp[i, t].sum()
        for i in range(B)
        for t in range(T)
        if tgt[i, t] != 0
    ]
    assert float(got) == pytest.approx(float(sum(rows) / len(rows)), rel=1e-12)


def test_subword_bleu_is_sacrebleu_on_detokenised_text_against_raw_refs() -> None:
    refs = ["A man in an orange hat.", "Two dogs play in the grass.", "A girl runs."]
    sp = train_spm(refs * 20 + ["hat dogs grass girl man orange"] * 5, 40)
    hyps_text = ["A man in an orange hat.", "Two dogs in the grass.", "A girl is running."]
    examples = [Example(sp.encode(r), sp.encode(r), ref=r) for r in refs]
    s = score([sp.encode(h) for h in hyps_text], examples, detok=sp.decode)
    assert s.bleu == pytest.approx(sacrebleu.corpus_bleu(hyps_text, [refs]).score, abs=1e-9)
    assert s.chrf == pytest.approx(sacrebleu.corpus_chrf(hyps_text, [refs]).score, abs=1e-9)
    assert not math.isclose(s.bleu, 100.0) and s.exact_match == pytest.approx(1 / 3)
