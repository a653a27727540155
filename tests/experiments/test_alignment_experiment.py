"""``attnkit experiment alignment``: the task statistics and the verdict against hand-computed
values, the equal budgets of every row, and one tiny trained model scored independently."""

from pathlib import Path

import pytest

from attnkit.experiments.alignment import (
    BLEU_FLOOR,
    GLOBAL,
    QUICK,
    ROWS,
    AlignmentConfig,
    crosses,
    diagonal_links,
    mean_std,
    score_run,
    summarise,
    task_stats,
    train_config,
    verdict,
)


def test_crossing_links_are_reordering() -> None:
    # "you write a book" -> "너는 책을 쓴다": the verb moves to the end, its link crosses
    assert crosses([(0, 0), (1, 2), (3, 1)])
    assert not crosses([(0, 0), (1, 1), (3, 2)])  # monotone, with an unaligned "a"
    assert not crosses([(0, 0), (1, 0), (2, 1)])  # two words to one: no crossing
    assert not crosses([])


def test_diagonal_guess_and_its_aer_by_hand() -> None:
    from attnkit.data.example import Example

    assert diagonal_links(4, 3) == {(0, 0), (1, 1), (3, 2)}  # round(4/3)=1, round(8/3)=3
    assert diagonal_links(2, 4) == {(0, 0), (0, 1), (1, 2), (1, 3)}  # round(1.5)=2 -> S-1
    ex = [
        Example(["you", "write", "a", "book"], ["너는", "책을", "쓴다"], [(0, 0), (1, 2), (3, 1)]),
        Example(["I", "sleep"], ["나는", "잔다"], [(0, 0), (1, 1)]),
    ]
    stats = task_stats(ex)
    assert stats["reordered_fraction"] == 0.5
    # A = {00, 11, 32} + {00, 11}; S = {00, 12, 31} + {00, 11}: |A∩S| = 1 + 2, |A| + |S| = 5 + 5
    assert stats["diagonal_aer"] == pytest.approx(1 - (3 + 3) / (5 + 5))


def test_toy_ko_needs_reordering() -> None:
    from attnkit.data.tasks import load_task

    test = load_task("toy-ko", seed=0, train_size=10, valid_size=10, test_size=200).test
    assert task_stats(test)["reordered_fraction"] > 0.8  # SVO -> SOV: nearly every sentence


def test_mean_std_by_hand() -> None:
    assert mean_std([1.0, 2.0, 3.0]) == pytest.approx((2.0, 1.0))
    assert mean_std([0.25]) == (0.25, 0.0)


def runs(aer: dict[str, list[float]], bleu: float = 95.0) -> list[dict]:
    return [
        {"model": m, "seed": s, "aer": a, "bleu": bleu, "exact": 90.0, "parameters": 10,
         "updates": 600, "seconds": 1.0}
        for m, xs in aer.items() for s, a in enumerate(xs)
    ]  # fmt: skip


def test_summarise_means_and_stds() -> None:
    s = summarise(runs({"global-location": [0.4, 0.5, 0.6], "local-m": [0.3, 0.3, 0.3]}))
    assert s["global-location"]["aer_mean"] == pytest.approx(0.5)
    assert s["global-location"]["aer_std"] == pytest.approx(0.1)
    assert s["local-m"]["aer_std"] == 0.0 and s["local-m"]["paper_aer"] == 0.34
    assert s["local-m"]["updates"] == [600] and s["local-m"]["seeds"] == 3
    assert s["global-location"]["aer_by_seed"] == [0.4, 0.5, 0.6]


def test_verdict_reproduced() -> None:
    s = summarise(runs({GLOBAL: [0.40, 0.42, 0.44], "local-m": [0.30, 0.31, 0.32],
                        "local-p": [0.35, 0.5, 0.2], "rnnsearch": [0.1, 0.1, 0.1]}))  # fmt: skip
    reasons, checks = verdict(s, reordered=0.9)
    assert reasons == []
    assert checks["best_local"] == "local-m"  # lower mean than local-p (0.31 < 0.35)
    assert checks["aer_gap"] == pytest.approx(0.11)
    assert checks["aer_margin"] == pytest.approx(0.02)  # the larger of the two stds


def test_verdict_not_reproduced() -> None:
    # the gap 0.05 is inside the global row's seed std 0.1
    s = summarise(runs({GLOBAL: [0.3, 0.4, 0.5], "local-p": [0.35, 0.35, 0.35]}))
    reasons, _ = verdict(s, reordered=0.9)
    assert len(reasons) == 1 and "not below global-location" in reasons[0]
    # local worse than global, a task without reordering, a model that did not learn
    s = summarise(runs({GLOBAL: [0.2, 0.2], "local-m": [0.3, 0.3]}, bleu=BLEU_FLOOR - 1))
    reasons, checks = verdict(s, reordered=0.1)
    assert len(reasons) == 3
    assert "need reordering" in reasons[0] and "gap -0.100" in reasons[1]
    assert "not learnt" in reasons[2] and "local-m 79.0" in reasons[2]
    assert checks["reasons"] == reasons
    reasons, _ = verdict(summarise(runs({"local-m": [0.3]})), reordered=0.9)
    assert "needs global-location and a local row" in reasons[0]


def test_bad_settings_fail_clearly() -> None:
    with pytest.raises(ValueError, match="--models 'global,local-m'; choose from"):
        AlignmentConfig(models="global,local-m")
    with pytest.raises(ValueError, match="names a row twice"):
        AlignmentConfig(models="local-m,local-m")
    with pytest.raises(ValueError, match="--seeds 0; it must be >= 1"):
        AlignmentConfig(seeds=0)
    with pytest.raises(ValueError, match="--lr"):
        AlignmentConfig(lr=0.0)


def test_every_row_gets_the_same_data_batches_optimiser_and_updates(tmp_path: Path) -> None:
    cfg = AlignmentConfig()
    assert cfg.updates == 600
    fits = {m: train_config(cfg, m, 1, tmp_path).to_json() for m in ROWS}
    for f in fits.values():
        assert f["data"] == fits[GLOBAL]["data"] and f["train"] == fits[GLOBAL]["train"]
        assert f["train"]["seed"] == 1 and f["train"]["patience"] == 0  # no early stop
    opts = {m: f["model"]["options"] for m, f in fits.items()}
    assert (opts["local-p"]["align"], opts["local-p"]["score"]) == ("local-p", "general")
    assert (opts[GLOBAL]["align"], opts[GLOBAL]["score"]) == ("global", "location")
    assert fits["rnnsearch"]["model"]["name"] == "rnnsearch"


def test_score_run_matches_an_independent_computation(tmp_path: Path, one_thread: None) -> None:
    """A tiny trained local-p model: the AER of its argmax attention counted here by hand,
    BLEU by sacrebleu itself, and the updates it took."""
    import sacrebleu
    import torch

    from attnkit.data.tasks import load_task
    from attnkit.decode import translate
    from attnkit.train import checkpoint
    from attnkit.train.fit import fit

    cfg = AlignmentConfig(**{**QUICK, "epochs": 2})
    result = fit(train_config(cfg, "local-p", 0, tmp_path), log=lambda s: None)
    test = load_task("toy-ko", seed=0, train_size=cfg.train_size, valid_size=cfg.valid_size,
                     test_size=cfg.test_size).test  # fmt: skip
    assert [e.src for e in test] == [e.src for e in result.data.test]
    got = score_run(tmp_path, test)
    assert got["updates"] == cfg.updates == 4

    ck = checkpoint.load(tmp_path / "last")
    hit = n_pred = n_gold = 0
    with torch.no_grad():
        for e in test:
            src = ck.src_vocab.encode(e.src)  # words, eos
            tgt_in = ck.tgt_vocab.encode(e.tgt, bos=True)[:-1]  # bos, words
            out = ck.model(torch.tensor([src]), torch.tensor([len(src)]), torch.tensor([tgt_in]))
            w = out.weights[0]  # (T+1, S+1): word rows and columns, then eos
            pred = {(int(w[t, : len(e.src)].argmax()), t) for t in range(len(e.tgt))}
            gold = set(e.links)
            hit, n_pred, n_gold = hit + len(pred & gold), n_pred + len(pred), n_gold + len(gold)
    assert got["aer"] == pytest.approx(1 - 2 * hit / (n_pred + n_gold))

    hyps = translate(ck.model, test, ck.src_vocab, ck.tgt_vocab).hyps
    bleu = sacrebleu.corpus_bleu([" ".join(h) for h in hyps], [[" ".join(e.tgt) for e in test]],
                                 tokenize="none").score  # fmt: skip
    assert got["bleu"] == pytest.approx(bleu)
    assert got["parameters"] == sum(p.numel() for p in ck.model.parameters())
