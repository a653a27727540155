"""One seed of ``attnkit experiment coref``: train the pronoun tagger to its validation
plateau, score its pronouns, measure every encoder head on the validation and the test
minimal pairs, zero each head in turn and score again (the ablation); the same head
measurements on the untrained model of that seed (the control); the famous two sentences'
maps."""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any

import torch

from ...data.coref import OPENERS, CorefItem, famous, minimal_pairs, pair_items, pair_split
from ..pool import generator
from .data import Batch, chunks, encode
from .measure import SPANS, best_head, keys_of, margins, masses, pair_rates
from .models import Tagger, ablated, build, fit, hits_of, maps, parameters

if TYPE_CHECKING:
    from .config import CorefConfig


def split(cfg: CorefConfig) -> dict[str, Any]:
    """Training sentences, and the validation and test minimal pairs (flattened, pairs
    interleaved), of the noun-pair split seeded by ``cfg.seed``, with the first
    ``cfg.openers`` openers."""
    train, valid, test = pair_split(cfg.seed, cfg.valid_fraction, cfg.test_fraction)
    openers, k = OPENERS[: cfg.openers], cfg.fillers
    flat = lambda ps, s: [x for p in minimal_pairs(ps, openers, k, s) for x in p]  # noqa: E731
    return {"train": pair_items(train, openers, k, cfg.seed), "valid": flat(valid, cfg.seed + 1),
            "test": flat(test, cfg.seed + 2),
            "pairs": {"train": len(train), "valid": len(valid), "test": len(test)}}  # fmt: skip


def make_batches(train: list[CorefItem], batch_size: int, seed: int) -> Any:
    """step -> that update's batch, a pure function of (seed, step)."""

    def batch(step: int) -> Batch:
        pick = torch.randint(0, len(train), (batch_size,), generator=generator(seed, step))
        return encode([train[int(i)] for i in pick])

    return batch


def head_rates(model: Tagger, pairs: list[Batch]) -> dict[str, Any]:
    """(L, H) lists over the minimal pairs in ``pairs`` (batches of interleaved pairs):
    follows and flips (phrase masses), follows_noun (the noun alone), mean phrase mass on the
    right and on the wrong noun."""
    picks: dict[str, list[torch.Tensor]] = {sp: [] for sp in SPANS}
    right, wrong = [], []
    for b in pairs:
        w = maps(model, b)  # (B, L, H, S, S)
        for sp in SPANS:
            m_r, m_o = masses(w, *keys_of(sp, b))  # (B, L, H) each
            picks[sp].append(m_r > m_o)
            if sp == "phrase":
                right.append(m_r)
                wrong.append(m_o)
    follows, flips = pair_rates(torch.cat(picks["phrase"]))  # (L, H) each
    noun, _ = pair_rates(torch.cat(picks["noun"]))
    return {"follows": follows.tolist(), "flips": flips.tolist(), "follows_noun": noun.tolist(),
            "right": torch.cat(right).mean(0).tolist(),
            "wrong": torch.cat(wrong).mean(0).tolist()}  # fmt: skip


def pronoun_scores(model: Tagger, batches: list[Batch]) -> dict[str, float]:
    """Pronoun accuracy over all sentences of ``batches`` and over those whose nouns' genders
    differ (where the tag needs the referent; every rule blind to it scores 1/2 there)."""
    hits = torch.cat([hits_of(model, b) for b in batches]).float()  # (N,)
    differ = torch.cat([b.differ for b in batches])  # (N,)
    return {"pronoun": float(hits.mean()), "pronoun_differ": float(hits[differ].mean())}


def ablations(model: Tagger, batches: list[Batch]) -> list[list[float]]:
    """(L, H): the pronoun accuracy (nouns of different gender) with that one head zeroed."""
    return [[pronoun_scores_ablated(model, batches, layer, head)
             for head in range(model.heads)] for layer in range(len(model.layers))]  # fmt: skip


def pronoun_scores_ablated(model: Tagger, batches: list[Batch], layer: int, head: int) -> float:
    with ablated(model, layer, head):
        return pronoun_scores(model, batches)["pronoun_differ"]


def chosen(valid: dict[str, Any], test: dict[str, Any]) -> dict[str, Any]:
    """The head with the largest margin (follows − anti-follows, ``measure.margin``) on the
    validation pairs, and its validation and test rates."""
    layer, head = best_head(margins(valid))
    return {"head": [layer, head], "valid": float(margins(valid)[layer, head]),
            "valid_follows": valid["follows"][layer][head],
            "margin": float(margins(test)[layer, head]),
            "follows": test["follows"][layer][head],
            "follows_noun": test["follows_noun"][layer][head],
            "flips": test["flips"][layer][head]}  # fmt: skip


def ablation_of(head: list[int], accuracy: float, zeroed: list[list[float]]) -> dict[str, float]:
    """For ``head`` = [layer, h] and ``zeroed`` (``ablations``' grid): the test accuracy with
    it zeroed, the mean with each other head of its layer zeroed (the expected accuracy with a
    head of that layer drawn at random), their costs (``accuracy`` minus each), and their gap
    (``gap`` = other − chosen: how much more accuracy the chosen head costs)."""
    layer, h = head
    if len(zeroed[layer]) < 2:
        raise ValueError("one head per layer: the ablation needs another head to compare; "
                         "pass --heads 2 or more")  # fmt: skip
    own = zeroed[layer][h]
    others = statistics.fmean(a for i, a in enumerate(zeroed[layer]) if i != h)
    return {"zeroed": own, "others_zeroed": others, "cost": accuracy - own,
            "others_cost": accuracy - others, "gap": others - own}


def famous_maps(model: Tagger, layer: int, head: int) -> list[dict[str, Any]]:
    """Both famous sentences: every encoder head's map (L, H, S, S), and head (layer, head)'s
    pronoun weight on the referent's phrase and on the other noun's ("right", "wrong"), and
    on the two nouns alone."""
    out = []
    for item in famous():
        b = encode([item])
        w = maps(model, b)  # (1, L, H, S, S)
        right, wrong = masses(w, *keys_of("phrase", b))  # (1, L, H) each
        row = w[0, layer, head, item.pronoun]  # (S,)
        out.append({
            "tokens": list(item.tokens), "pronoun": item.pronoun, "referent": item.referent,
            "other": item.other, "right": float(right[0, layer, head]),
            "wrong": float(wrong[0, layer, head]), "right_noun": float(row[item.referent]),
            "wrong_noun": float(row[item.other]), "said": bool(hits_of(model, b)[0]),
            "weights": w[0].numpy().round(4).tolist(),
        })  # fmt: skip
    return out


def train_seed(cfg: CorefConfig, seed: int) -> dict[str, Any]:
    """Everything measured for one seed (see the module docstring)."""
    torch.set_num_threads(cfg.threads)
    data = split(cfg)
    held = {k: chunks(data[k]) for k in ("valid", "test")}  # even chunks keep pairs together
    torch.manual_seed(seed)
    model = build(cfg.dim, cfg.heads, cfg.layers, cfg.ff).eval()
    control = {k: head_rates(model, b) for k, b in held.items()}
    control_scores = pronoun_scores(model, held["test"])
    run = fit(model, make_batches(data["train"], cfg.batch_size, seed), held["valid"],
              steps=cfg.steps, eval_every=cfg.eval_every, patience=cfg.patience, lr=cfg.lr,
              seed=seed, clip=cfg.clip, min_delta=cfg.min_delta)  # fmt: skip
    valid, test = head_rates(model, held["valid"]), head_rates(model, held["test"])
    scores = pronoun_scores(model, held["test"])
    zeroed = ablations(model, held["test"])
    pick = chosen(valid, test)
    return {
        "seed": seed,
        "parameters": parameters(model),
        "training": run,
        "scores": scores,
        "valid_scores": pronoun_scores(model, held["valid"]),
        "heads": test,
        "valid_heads": valid,
        "zeroed": zeroed,
        "chosen": pick,
        "ablation": ablation_of(pick["head"], scores["pronoun_differ"], zeroed),
        "control": {"scores": control_scores, **chosen(control["valid"], control["test"])},
        "famous": famous_maps(model, *pick["head"]),
    }


__all__ = ["ablation_of", "ablations", "chosen", "famous_maps", "head_rates", "make_batches",
           "pronoun_scores", "split", "train_seed"]  # fmt: skip
