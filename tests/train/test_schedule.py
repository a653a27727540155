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


def test_lr_decay_follows_its_formula_at_the_first_middle_and_last_step() -> None:
    """linear: lr (1 - p), cosine: lr (1 + cos(pi p)) / 2 (Loshchilov & Hutter 2017, eq. 5,
    eta_min = 0), p = (s - 1) / total the fraction of the decay done before step s; written
    out here by hand for total = 1000."""
    lr, total = 2e-3, 1000
    cos = TrainConfig(lr=lr, lr_decay="cosine")
    lin = TrainConfig(lr=lr, lr_decay="linear")
    assert cos.lr_at(1, total) == lr and lin.lr_at(1, total) == lr  # p = 0: the full lr
    assert cos.lr_at(501, total) == pytest.approx(lr / 2, rel=1e-12)  # p = 1/2: cos = 0
    assert lin.lr_at(501, total) == pytest.approx(lr / 2, rel=1e-12)
    assert cos.lr_at(251, total) == pytest.approx(lr * (1 + 2**-0.5) / 2, rel=1e-12)
    assert lin.lr_at(251, total) == pytest.approx(lr * 0.75, rel=1e-12)
    last = 999 / 1000  # the last step: a little above 0, never 0 (its update counts)
    assert cos.lr_at(total, total) == pytest.approx(lr * (1 + math.cos(math.pi * last)) / 2,
                                                    rel=1e-12)  # fmt: skip
    assert lin.lr_at(total, total) == pytest.approx(lr / 1000, rel=1e-12)
    assert 0 < cos.lr_at(total, total) < 1e-7 * 1000 * lr
    assert lin.lr_at(total + 50, total) == lin.lr_at(total, total)  # past the cap: clamped
    steps = range(1, total + 1)
    assert all(cos.lr_at(s, total) > cos.lr_at(s + 1, total) for s in steps[:-1])


def test_lr_decay_after_warmup_rises_then_falls_from_the_peak() -> None:
    w, total, lr = 100, 1100, 1e-3
    cfg = TrainConfig(lr=lr, warmup=w, lr_decay="linear")
    assert cfg.lr_at(50, total) == pytest.approx(lr / 2, rel=1e-12)  # the rise: lr s / w
    assert cfg.lr_at(w, total) == lr and cfg.lr_at(w + 1, total) == lr  # p = 0 after it
    assert cfg.lr_at(601, total) == pytest.approx(lr / 2, rel=1e-12)  # p = 500 / 1000
    cos = TrainConfig(lr=lr, warmup=w, lr_decay="cosine")
    assert cos.lr_at(601, total) == pytest.approx(lr / 2, rel=1e-12)


def test_no_lr_decay_leaves_the_schedule_as_it_was() -> None:
    """lr_decay none (the default) ignores the total: constant, or Vaswani's warm-up."""
    assert TrainConfig().lr_decay == "none"
    for total in (0, 10, 10_000):
        assert TrainConfig(lr=3e-4).lr_at(7, total) == 3e-4
        noam = TrainConfig(lr=1e-3, warmup=400)
        assert noam.lr_at(1600, total) == pytest.approx(1e-3 * 0.5, rel=1e-12)


def test_lr_decay_drives_the_optimiser_to_the_end_of_the_cap(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """The loop hands the cap (epochs x batches an epoch) to the schedule: the lr Adam holds
    at each update is the formula's at step s of total, down to the last."""
    from attnkit.data.tasks import load_task
    from attnkit.data.vocab import Vocab
    from attnkit.models import build_model
    from attnkit.train import loop

    sp = load_task("toy-ko", seed=0, train_size=24, valid_size=4, test_size=4)
    sv, tv = Vocab.build(e.src for e in sp.train), Vocab.build(e.tgt for e in sp.train)
    model = build_model("rnnsearch", src_vocab=len(sv), tgt_vocab=len(tv), preset="tiny")
    seen: list[float] = []
    real = loop.update

    def update(model, opt, loss, clip):  # noqa: ANN001, ANN202
        seen.append(opt.param_groups[0]["lr"])
        return real(model, opt, loss, clip)

    monkeypatch.setattr(loop, "update", update)
    cfg = TrainConfig(epochs=2, batch_size=8, lr=1e-2, lr_decay="cosine", patience=0,
                      valid_decode=0, progress=False)  # fmt: skip
    loop.train(model, "rnnsearch", sp.train, sp.valid, sv, tv, cfg, tmp_path,
               log=lambda s: None)  # fmt: skip
    total = 2 * 3  # 24 pairs, 8 a batch: 3 updates an epoch, 2 epochs
    want = [1e-2 * (1 + math.cos(math.pi * (s - 1) / total)) / 2 for s in range(1, total + 1)]
    assert seen == pytest.approx(want, rel=1e-12)


def test_bad_schedule_options_are_refused() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        TrainConfig(warmup=-1)
    with pytest.raises(ValueError, match=r"label_smoothing=1.0; it must be in \[0, 1\)"):
        TrainConfig(label_smoothing=1.0)
    with pytest.raises(ValueError, match="valid_decode"):
        TrainConfig(valid_decode=-2)
    with pytest.raises(ValueError, match="lr_decay='cos'; choose one of none, linear, cosine"):
        TrainConfig(lr_decay="cos")
    with pytest.raises(ValueError, match=r"total updates \(100\) to exceed warmup \(100\)"):
        TrainConfig(warmup=100, lr_decay="linear").lr_at(1, 100)


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


def test_the_divergence_message_names_the_decayed_lr(tmp_path) -> None:  # noqa: ANN001
    """At update 5 of 10 with a linear decay the lr was 1e-2 (1 - 4/10) = 0.006; before the
    loop knows the cap (total 0) the message names the peak instead of failing."""
    from attnkit.train.loop import diverged

    cfg = TrainConfig(lr=1e-2, lr_decay="linear")
    assert "(lr 0.006)" in str(diverged("the training loss is nan", 5, cfg, tmp_path, 10))
    assert "(lr 0.01)" in str(diverged("the training loss is nan", 5, cfg, tmp_path))
