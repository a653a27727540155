"""Swap sparsemax into a small Hugging Face GPT-2 and look at the sparser attention maps.

    pip install 'attnkit[hf]'
    python examples/hf_sparsemax.py --out runs/hf-sparsemax
    attnkit view --weights runs/hf-sparsemax/softmax.safetensors --out softmax.html
    attnkit view --weights runs/hf-sparsemax/sparsemax.safetensors --out sparsemax.html

Two copies of one tiny GPT-2 (built from a config, no download), the same initial weights,
one with ``attn_implementation="attnkit"`` (softmax, = "sdpa") and one with
``"attnkit_sparsemax"`` (Martins & Astudillo 2016), are trained on the same generated copy
task: ``a b c ... | a b c ...`` (the second half repeats the first), so a head that looks back
to the token to copy has something to find. The attention weights of one held-out sequence are
saved with ``attnkit.viz.save_attention`` as (layers, heads, T, T), and the fraction of exact
zeros among the keys each query may attend (j <= i) is printed: softmax gives none, sparsemax
many.
"""

from __future__ import annotations

import argparse
import copy
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

import attnkit.hf
from attnkit.viz import save_attention

SEP = 0  # token 0 separates the two halves; symbols are 1 .. vocab - 1


def copy_batch(n: int, half: int, vocab: int, gen: torch.Generator) -> torch.Tensor:
    """(n, 2·half + 1) sequences ``x | x``, x of ``half`` random symbols."""
    x = torch.randint(1, vocab, (n, half), generator=gen)  # (n, half)
    sep = torch.full((n, 1), SEP, dtype=torch.long)
    return torch.cat([x, sep, x], dim=1)  # (n, 2·half + 1)


def build(implementation: str, vocab: int, length: int, seed: int) -> Any:
    """A 2-layer, 2-head GPT-2 with hidden width 32, initialised from ``seed``."""
    from transformers import AutoModelForCausalLM, GPT2Config

    cfg = GPT2Config(vocab_size=vocab, n_embd=32, n_layer=2, n_head=2, n_positions=length,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                     bos_token_id=SEP, eos_token_id=SEP)  # fmt: skip
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(copy.deepcopy(cfg), attn_implementation=implementation)


def train(model: Any, steps: int, batch: int, half: int, vocab: int, seed: int) -> float:
    """AdamW on fresh copy batches; returns the last loss (next-token cross-entropy)."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    loss = torch.tensor(float("nan"))
    for _ in range(steps):
        ids = copy_batch(batch, half, vocab, gen)  # (batch, T)
        loss = model(ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    return float(loss.detach())


def copy_accuracy(model: Any, ids: torch.Tensor, half: int) -> float:
    """Teacher-forced accuracy of the second half (the copied tokens)."""
    model.eval()
    with torch.no_grad():
        pred = model(ids).logits.argmax(-1)  # (n, T)
    return float((pred[:, half:-1] == ids[:, half + 1 :]).float().mean())


def zero_fraction(weights: torch.Tensor) -> float:
    """Exact zeros among the allowed (causal, j <= i) entries of (L, H, T, T) weights."""
    t = weights.shape[-1]
    allowed = torch.ones(t, t, dtype=torch.bool).tril()  # (T, T)
    return float((weights[..., allowed] == 0).float().mean())


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=300, help="training steps per model")
    p.add_argument("--batch", type=int, default=32, help="sequences per step")
    p.add_argument("--half", type=int, default=8, help="symbols per half of a sequence")
    p.add_argument("--vocab", type=int, default=16, help="vocabulary size, SEP included")
    p.add_argument("--seed", type=int, default=0, help="seed of the weights and the data")
    p.add_argument("--out", default="runs/hf-sparsemax", help="folder for the weights files")
    p.add_argument("--threads", type=int, default=1, help="torch threads (tiny model: 1)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    attnkit.hf.register()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    length = 2 * args.half + 1
    test = copy_batch(64, args.half, args.vocab, torch.Generator().manual_seed(args.seed + 1))
    tokens = ["|" if int(i) == SEP else f"s{int(i)}" for i in test[0]]
    result: dict[str, Any] = {}
    for label, implementation in (("softmax", "attnkit"), ("sparsemax", "attnkit_sparsemax")):
        start = time.perf_counter()
        model = build(implementation, args.vocab, length, args.seed)
        loss = train(model, args.steps, args.batch, args.half, args.vocab, args.seed)
        acc = copy_accuracy(model, test, args.half)
        with torch.no_grad():
            maps = model(test[:1], output_attentions=True).attentions  # L x (1, H, T, T)
        weights = torch.cat(maps).float()  # (L, H, T, T)
        path = save_attention(out / f"{label}.safetensors", weights, tokens)  # self-attention
        result[label] = {"loss": loss, "copy_accuracy": acc, "zeros": zero_fraction(weights),
                         "seconds": time.perf_counter() - start, "file": str(path)}  # fmt: skip
        r = result[label]
        print(f"{label:9s} ({implementation}): loss {loss:.3f}, copy accuracy {acc:.1%}, "
              f"exact zeros {r['zeros']:.1%} of allowed weights, {r['seconds']:.1f} s -> {path}")
    print(f"look: attnkit view --weights {out}/sparsemax.safetensors --out sparsemax.html")
    return result


if __name__ == "__main__":
    main()
