"""One seed of ``attnkit experiment coref``: train the translation model, score its pronouns,
and measure every head on the validation and the test minimal pairs; the same measurements
on the untrained model of that seed (the control); the famous two sentences' maps."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from ...data.coref import OPENERS, CorefItem, famous, minimal_pairs, pair_items, pair_split
from ..pool import generator
from .data import Batch, chunks, encode
from .measure import KINDS, SPANS, best_head, keys_of, masses, pair_rates
from .models import build, fit_translation, hits_of, maps, parameters

if TYPE_CHECKING:
    from ...models.transformer import Transformer
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


def head_rates(model: Transformer, pairs: list[Batch]) -> dict[str, dict[str, Any]]:
    """Per attention kind, (L, H) lists: follows and flips (phrase masses), follows_noun (the
    noun alone), mean phrase mass on the right and on the wrong noun, over the minimal pairs
    in ``pairs`` (batches of interleaved pairs)."""
    keys = [(k, sp) for k in KINDS for sp in SPANS]
    picks: dict[tuple[str, str], list[torch.Tensor]] = {x: [] for x in keys}
    right: dict[str, list[torch.Tensor]] = {k: [] for k in KINDS}
    wrong: dict[str, list[torch.Tensor]] = {k: [] for k in KINDS}
    for b in pairs:
        w = maps(model, b)
        for k, sp in keys:
            m_r, m_o = masses(w[k], *keys_of(k, sp, b))  # (B, L, H) each
            picks[k, sp].append(m_r > m_o)
            if sp == "phrase":
                right[k].append(m_r)
                wrong[k].append(m_o)
    out = {}
    for k in KINDS:
        follows, flips = pair_rates(torch.cat(picks[k, "phrase"]))  # (L, H) each
        noun, _ = pair_rates(torch.cat(picks[k, "noun"]))
        out[k] = {"follows": follows.tolist(), "flips": flips.tolist(),
                  "follows_noun": noun.tolist(), "right": torch.cat(right[k]).mean(0).tolist(),
                  "wrong": torch.cat(wrong[k]).mean(0).tolist()}  # fmt: skip
    return out


def pronoun_scores(model: Transformer, batches: list[Batch]) -> dict[str, float]:
    """Pronoun accuracy over all sentences of ``batches`` and over those whose nouns'
    genders differ; target-word accuracy (teacher forcing)."""
    hits, differ, words, total = [], [], 0, 0
    for b in batches:
        h, (w, n) = hits_of(model, b)
        hits.append(h)
        differ.append(b.differ)
        words, total = words + w, total + n
    h, d = torch.cat(hits).float(), torch.cat(differ)
    return {"pronoun": float(h.mean()), "pronoun_differ": float(h[d].mean()),
            "words": words / total}  # fmt: skip


def famous_maps(model: Transformer, layer: int, head: int) -> list[dict[str, Any]]:
    """Both famous sentences: every encoder head's map (L, H, S, S), and head (layer, head)'s
    pronoun weight on the referent's phrase and on the other noun's ("right", "wrong"), and
    on the two nouns alone."""
    out = []
    for item in famous():
        b = encode([item])
        w = maps(model, b)["enc-self"]  # (1, L, H, S, S)
        right, wrong = masses(w, *keys_of("enc-self", "phrase", b))  # (1, L, H) each
        row = w[0, layer, head, item.pronoun]  # (S,)
        out.append({
            "tokens": list(item.tokens), "pronoun": item.pronoun, "referent": item.referent,
            "other": item.other, "right": float(right[0, layer, head]),
            "wrong": float(wrong[0, layer, head]), "right_noun": float(row[item.referent]),
            "wrong_noun": float(row[item.other]), "said": bool(hits_of(model, b)[0][0]),
            "weights": w[0].numpy().round(4).tolist(),
        })  # fmt: skip
    return out


def chosen(rates: dict[str, dict[str, Any]], valid: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per attention kind, the head with the largest follows rate on the validation pairs,
    and its test follows and flips."""
    out = {}
    for k in KINDS:
        layer, head = best_head(torch.tensor(valid[k]["follows"]))
        out[k] = {"head": [layer, head], "valid": valid[k]["follows"][layer][head],
                  "follows": rates[k]["follows"][layer][head],
                  "follows_noun": rates[k]["follows_noun"][layer][head],
                  "flips": rates[k]["flips"][layer][head]}  # fmt: skip
    return out


def train_seed(cfg: CorefConfig, seed: int) -> dict[str, Any]:
    """Everything measured for one seed (see the module docstring)."""
    torch.set_num_threads(cfg.threads)
    data = split(cfg)
    held = {k: chunks(data[k]) for k in ("valid", "test")}  # even chunks keep pairs together
    torch.manual_seed(seed)
    model = build(cfg.dim, cfg.heads, cfg.enc_layers, cfg.dec_layers, cfg.ff).eval()
    control = {k: head_rates(model, b) for k, b in held.items()}
    losses = fit_translation(model, make_batches(data["train"], cfg.batch_size, seed),
                             cfg.steps, cfg.lr, seed, clip=cfg.clip)  # fmt: skip
    valid, test = head_rates(model, held["valid"]), head_rates(model, held["test"])
    pick = chosen(test, valid)
    tail = losses[-max(1, cfg.steps // 10) :]
    return {
        "seed": seed,
        "parameters": parameters(model),
        "final_train_loss": sum(tail) / len(tail),
        "scores": pronoun_scores(model, held["test"]),
        "valid_scores": pronoun_scores(model, held["valid"]),
        "heads": test,
        "valid_heads": valid,
        "chosen": pick,
        "control": chosen(control["test"], control["valid"]),
        "famous": famous_maps(model, *pick["enc-self"]["head"]),
    }


__all__ = ["chosen", "famous_maps", "head_rates", "make_batches", "pronoun_scores", "split",
           "train_seed"]  # fmt: skip
