"""``attnkit experiment coref``: the attention-mass metric on hand-made weights, the encoder's
maps and readout, batches shared by both models, the verdict on synthetic numbers, bad
settings, and the quick run's files."""

import copy
import json
from pathlib import Path

import pytest
import torch

from attnkit.data.coref import FAMOUS, famous, nouns, sentence
from attnkit.experiments.coref import (
    QUICK,
    CorefConfig,
    data,
    make_batches,
    run_experiment,
    verdict,
)
from attnkit.experiments.coref.models import (
    best_head,
    build_encoder,
    encode,
    mass_table,
    positions,
    pronoun_mass,
)
from attnkit.experiments.coref.report import report

pytestmark = pytest.mark.usefixtures("one_thread_module")


def test_pronoun_mass_reads_the_pronoun_row_at_both_nouns() -> None:
    """Hand-made weights (B=2, L=1, H=2, S=4): only the pronoun's row matters."""
    w = torch.zeros(2, 1, 2, 4, 4)
    w[0, 0, 0, 2] = torch.tensor([0.7, 0.1, 0.0, 0.2])  # sentence 0, head 0, pronoun at 2
    w[0, 0, 1, 2] = torch.tensor([0.1, 0.6, 0.1, 0.2])
    w[1, 0, 0, 1] = torch.tensor([0.3, 0.0, 0.3, 0.4])  # sentence 1, pronoun at 1
    w[1, 0, 1, 1] = torch.tensor([0.0, 0.0, 0.1, 0.9])
    w[:, :, :, 0] = 0.25  # a row that is not the pronoun's: must be ignored
    pronoun, right, wrong = torch.tensor([2, 1]), torch.tensor([0, 3]), torch.tensor([1, 0])
    r, o = pronoun_mass(w, pronoun, right, wrong)
    assert torch.allclose(r, torch.tensor([[[0.7, 0.1]], [[0.4, 0.9]]]))  # (B, L, H)
    assert torch.allclose(o, torch.tensor([[[0.1, 0.6]], [[0.3, 0.0]]]))
    # mean margins: head 0 (0.55 - 0.2 = 0.35) beats head 1 (0.5 - 0.3 = 0.2)
    assert best_head(r.mean(0), o.mean(0)) == (0, 0)
    assert best_head(torch.tensor([[0.1, 0.2], [0.9, 0.3]]), torch.zeros(2, 2)) == (1, 0)


def test_mass_table_on_sentences() -> None:
    tired, wide = famous()
    s = len(tired.tokens)
    w = torch.zeros(2, 2, 1, s, s)
    w[0, 1, 0, tired.pronoun, 1] = 0.8  # layer 1 looks at "animal" in both sentences
    w[1, 1, 0, wide.pronoun, 1] = 0.8
    w[0, 0, 0, tired.pronoun, [1, 5]] = 0.3  # layer 0: a tie, then nothing on either noun
    t = mass_table(w, [tired, wide])
    assert torch.allclose(t["right"], torch.tensor([[0.15], [0.4]]))  # (L, H)
    assert torch.allclose(t["wrong"], torch.tensor([[0.15], [0.4]]))
    assert torch.allclose(t["picks_right"], torch.tensor([[0.0], [0.5]]))  # ties are not picks
    p, r, o = positions([tired, wide])
    assert p.tolist() == [7, 7] and r.tolist() == [1, 5] and o.tolist() == [5, 1]


def test_the_encoder_attends_over_real_tokens_and_ignores_padding() -> None:
    torch.manual_seed(0)
    enc = build_encoder(16, 2, 2, 32).eval()
    short = sentence(FAMOUS[0])
    long = sentence(("fit", "trophy", "suitcase", "big"), "in the end ,")
    tokens, labels = encode([short, long])  # (2, S) right-padded
    assert tokens.shape == (2, len(long.tokens)) and int(tokens[0, -1]) == 0
    assert [nouns()[i] for i in labels] == ["animal", "trophy"]
    w = enc.attention(tokens)  # (B, L, H, S, S)
    assert w.shape == (2, 2, 2, tokens.shape[1], tokens.shape[1])
    n = len(short.tokens)
    assert torch.allclose(w[0, :, :, :n].sum(-1), torch.ones(2, 2, n), atol=1e-5)
    assert float(w[0, :, :, :, n:].abs().max()) == 0.0  # no weight on padding
    alone = enc(encode([short])[0])  # (1, C)
    assert torch.allclose(enc(tokens)[0], alone[0], atol=1e-5)  # padding changes nothing
    left, _ = encode([short, long], left=True)
    assert left[0, -len(short.tokens) :].tolist() == tokens[0, : len(short.tokens)].tolist()
    with pytest.raises(ValueError, match="pronoun"):
        enc(torch.ones(1, 5, dtype=torch.long))


def test_both_models_see_the_same_sentences() -> None:
    train, test = data(CorefConfig(**QUICK))
    right, left = make_batches(train, 6, 4, False), make_batches(train, 6, 4, True)
    a, b = right(3), left(3)
    assert torch.equal(a[1], b[1]) and torch.equal(right(3)[0], a[0])
    assert not torch.equal(right(4)[0], a[0])
    for row_r, row_l in zip(a[0], b[0], strict=True):
        assert row_r[row_r != 0].tolist() == row_l[row_l != 0].tolist()
    assert not {x.combination for x in train} & {x.combination for x in test}


def _seed(seed: int, acc: float, right: float, wrong: float, famous_rw: list) -> dict:
    mass = {"right": [[0.1, 0.2], [0.3, right]], "wrong": [[0.1, 0.2], [0.3, wrong]]}
    return {
        "seed": seed,
        "transformer": {"accuracy": acc},
        "mass": mass,
        "best_head": [1, 1],
        "famous": [{"right": r, "wrong": w} for r, w in famous_rw],
    }


def test_verdict_passes_when_a_head_resolves_it_in_every_seed() -> None:
    good = [_seed(s, 0.97, 0.8, 0.05, [(0.9, 0.02), (0.7, 0.1)]) for s in range(3)]
    reasons, checks = verdict(good)
    assert reasons == [] and checks["reproduced"]
    assert all(c["flips"] for c in checks["per_seed"])


def test_verdict_fails_on_each_broken_check() -> None:
    good = [_seed(s, 0.97, 0.8, 0.05, [(0.9, 0.02), (0.7, 0.1)]) for s in range(3)]
    cases = {
        "accuracy 85.0%": _seed(1, 0.85, 0.8, 0.05, [(0.9, 0.02), (0.7, 0.1)]),
        "puts 0.45 of the pronoun's mass": _seed(1, 0.97, 0.45, 0.05, [(0.9, 0.0), (0.7, 0.1)]),
        "'... too wide' head L1H1 puts 0.40": _seed(1, 0.97, 0.8, 0.05, [(0.9, 0.0), (0.4, 0.1)]),
        "'... too tired' head L1H1 puts 0.55 on the right noun, 0.60": _seed(
            1, 0.97, 0.8, 0.05, [(0.55, 0.6), (0.9, 0.0)]
        ),
    }
    for text, bad in cases.items():
        seeds = copy.deepcopy(good)
        seeds[1] = bad
        reasons, checks = verdict(seeds)
        assert len(reasons) == 1 and text in reasons[0] and reasons[0].startswith("seed 1")
        assert not checks["reproduced"]
    _, checks = verdict([cases["'... too tired' head L1H1 puts 0.55 on the right noun, 0.60"]])
    assert checks["per_seed"][0]["flips"] is False


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"seeds": 0}, "--seeds"),
        ({"dim": 30, "heads": 4}, "divisible"),
        ({"lr": 0.0}, "--lr"),
        ({"test_fraction": 1.0}, "--test-fraction"),
        ({"batch_size": 0}, "--batch-size"),
    ],
)
def test_bad_settings_fail_clearly(kw: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        CorefConfig(**kw)


def test_quick_run_writes_both_famous_maps(tmp_path: Path) -> None:
    cfg = CorefConfig(**QUICK)
    result = run_experiment(cfg, tmp_path, say=lambda _: None)
    report(result, tmp_path, say=lambda _: None)
    (l, h), first = result["seeds"][0]["best_head"], result["seeds"][0]
    for f, (adj, noun) in zip(first["famous"], (("tired", "animal"), ("wide", "street")),
                              strict=True):  # fmt: skip
        assert f["tokens"][-1] == adj and f["tokens"][f["referent"]] == noun
        assert f["right"] == pytest.approx(f["weights"][l][h][f["pronoun"]][f["referent"]])
    rows = (tmp_path / "coref.csv").read_text().strip().splitlines()
    assert len(rows) == 1 + cfg.layers * cfg.heads
    page = (tmp_path / "coref.html").read_text()
    assert "it (... too tired)" in page and "tired / wide" in page
    assert (tmp_path / "coref-famous.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((tmp_path / "coref.json").read_text())["parameters"]["lstm"] > 0
