"""Any Hugging Face model's attention on one text, every layer and head: the maps of the model
view (``attnkit view --hf PATH_OR_NAME "text"``).

    tokenizer, model = load_model("runs/my-bert")   # a folder written by save_pretrained
    maps = model_maps(model, tokenizer, "the cat sat")
    write_model_view("bert.html", maps.maps, title="my-bert")

The model runs once with ``output_attentions=True`` and HF's eager attention, the one
implementation that returns its weights, softmax(q kᵀ · scaling + mask) per head (Vaswani
et al. 2017, eq. 1): the maps are the model's own weights. Tokens are the tokenizer's,
``convert_ids_to_tokens`` ("[CLS]", "Ġcat", "▁cat"), special tokens included.

Maps, name -> ``AttentionRecord``:

* a bidirectional encoder (BERT): "enc-self" (L, H, T, T);
* a decoder-only language model (GPT-2, Llama): "dec-self" (L, H, T, T); a stack counts as
  causal when no weight lies above its diagonal;
* an encoder-decoder (T5, BART, Marian): "enc-self" (L, H, S, S), "dec-self" (L, H, T, T) and
  "cross" (L, H, T, S). The decoder reads the model's own greedy output (``generate``, at most
  ``max_new_tokens`` tokens), or ``target`` teacher-forced. As in attnkit's translation views,
  with the decoder's sequence [start, y_1, …, y_n] the decoder input is [start, y_1, …,
  y_{n-1}]: the rows and keys of "dec-self" are these input tokens, and the rows of "cross"
  are the tokens the queries produced, y_1 … y_n.

Safety: nothing from the folder or the hub runs as code (``trust_remote_code=False``) and the
weights are read from safetensors only (``use_safetensors=True``): a ``.bin``/``.pt`` file is a
pickle, which can run code while it loads. A local folder without a ``.safetensors`` file is
refused before anything is read from it.

Legend: L layers, H heads, S encoder tokens, T tokens of the decoder (or of the one stack).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from .weights_file import AttentionRecord

__all__ = ["HFMaps", "load_model", "model_maps"]

_FIX = "pass a local folder saved with save_pretrained (the model and its tokenizer)"
# files that hold weights as a pickle: never loaded
_PICKLES = ("*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl")


@dataclass(frozen=True)
class HFMaps:
    """One text through one model: ``maps`` name -> record (see the module doc); ``output``
    the decoder's text of an encoder-decoder (None otherwise); ``cut`` the input tokens that
    ``truncate`` dropped (0: none)."""

    maps: dict[str, AttentionRecord]
    output: str | None = None
    cut: int = 0


def _transformers() -> Any:
    try:
        import transformers
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "viewing a Hugging Face model needs transformers >= 5: pip install 'attnkit[hf]'"
        ) from err
    return transformers


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__


def _check_weights(folder: Path) -> None:
    """A local model folder must hold safetensors weights; a pickle-only folder is refused."""
    if any(folder.glob("*.safetensors")):
        return
    pickles = sorted(p.name for pattern in _PICKLES for p in folder.glob(pattern))
    if pickles:
        raise ValueError(
            f"{folder} holds {', '.join(pickles)} but no .safetensors weights: attnkit loads "
            "safetensors only (a .bin is a pickle, which can run code while it loads); where "
            "you trust the file, convert it with AutoModel.from_pretrained(DIR)"
            ".save_pretrained(DIR), which writes model.safetensors"
        )
    raise ValueError(f"{folder} has no .safetensors weights: {_FIX}")


def load_model(name_or_path: str | Path) -> tuple[Any, Any]:
    """(tokenizer, model) from a local folder or a hub name, the model in eval mode with eager
    attention; an encoder-decoder as ``AutoModelForSeq2SeqLM`` (it generates), any other
    model as ``AutoModel``. Errors are one line that says what to pass."""
    tf = _transformers()
    folder = Path(name_or_path).expanduser()
    local = folder.is_dir()
    if local:
        _check_weights(folder)
    elif str(name_or_path).startswith((".", "/", "~")) or str(name_or_path).count("/") > 1:
        raise FileNotFoundError(f"no folder {name_or_path}: {_FIX}, or a hub name (org/model)")
    source = str(folder) if local else str(name_or_path)
    safe = {"trust_remote_code": False}
    try:
        config = tf.AutoConfig.from_pretrained(source, **safe)
        auto = tf.AutoModelForSeq2SeqLM if config.is_encoder_decoder else tf.AutoModel
        tokenizer = tf.AutoTokenizer.from_pretrained(source, **safe)
        model = auto.from_pretrained(
            source, config=config, use_safetensors=True, attn_implementation="eager", **safe
        )
    except (OSError, ValueError) as err:
        if local:
            raise ValueError(f"{folder}: {_first_line(err)} ({_FIX})") from err
        raise ValueError(
            f"cannot load {str(name_or_path)!r}: it is not a local folder, and the Hugging Face "
            f"hub said: {_first_line(err)} Offline, or for a name the hub lacks, {_FIX}"
        ) from err
    return tokenizer, model.eval()


def _max_positions(config: Any) -> int | None:
    """The longest input the model's position table holds; None for relative positions."""
    for attr in ("max_position_embeddings", "n_positions"):
        value = getattr(config, attr, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _encode(
    tokenizer: Any, text: str, limit: int | None, truncate: bool
) -> tuple[Tensor, int]:
    """(input ids (1, S), tokens cut) of ``text``, at most ``limit`` tokens."""
    ids = tokenizer(text)["input_ids"]
    if not ids:
        raise ValueError("the text has no tokens: pass some words")
    if limit is None or len(ids) <= limit:
        return torch.tensor([ids]), 0
    if not truncate:
        raise ValueError(
            f"the text has {len(ids):,} tokens, over the limit of {limit}: shorten it, or let "
            "it be cut (truncate=True, --truncate)"
        )
    cut = tokenizer(text, truncation=True, max_length=limit)["input_ids"]
    return torch.tensor([cut]), len(ids) - len(cut)


def _stack(attentions: Any, what: str) -> Tensor:
    """HF's per-layer tuple of (1, H, Tq, Tk) -> (L, H, Tq, Tk) float32."""
    if not attentions or any(a is None for a in attentions):
        raise ValueError(
            f"the model returned no {what} weights for output_attentions=True; attnkit shows "
            "models whose eager attention returns them"
        )
    return torch.stack([a[0] for a in attentions]).float()  # (L, H, Tq, Tk)


def _decoder_sequence(
    model: Any, tokenizer: Any, enc: dict[str, Tensor], target: str | None, max_new: int
) -> list[int]:
    """[start, y_1, …, y_n]: the greedy output, or ``target``'s tokens after the start."""
    if target is None:
        out = model.generate(**enc, max_new_tokens=max_new, do_sample=False, num_beams=1)
        return [int(i) for i in out[0]]
    start = model.generation_config.decoder_start_token_id
    if start is None:
        start = model.config.decoder_start_token_id
    if start is None:
        raise ValueError("the model names no decoder_start_token_id to begin the target with")
    ids = tokenizer(text_target=target)["input_ids"]
    if not ids:
        raise ValueError("the target has no tokens: pass some words")
    return [int(start), *ids]


def model_maps(
    model: Any,
    tokenizer: Any,
    text: str,
    *,
    target: str | None = None,
    max_new_tokens: int = 20,
    max_input_len: int | None = None,
    truncate: bool = False,
) -> HFMaps:
    """Every attention map of ``model`` on ``text`` (see the module doc): one forward pass with
    ``output_attentions=True``, after greedy generation for an encoder-decoder unless
    ``target`` is given. ``max_input_len``: the most input tokens (also bounded by the
    model's position table); longer text is an error, or cut with ``truncate``."""
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens={max_new_tokens}: pass at least 1")
    if max_input_len is not None and max_input_len < 1:
        raise ValueError(f"max_input_len={max_input_len}: pass at least 1")
    seq2seq = bool(getattr(model.config, "is_encoder_decoder", False))
    if target is not None and not seq2seq:
        raise ValueError("a target goes with an encoder-decoder model (T5, BART); this model "
                         "reads the text alone")  # fmt: skip
    limits = [n for n in (max_input_len, _max_positions(model.config)) if n is not None]
    ids, cut = _encode(tokenizer, text, min(limits) if limits else None, truncate)  # (1, S)
    enc = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    tokens = tokenizer.convert_ids_to_tokens(ids[0].tolist())
    with torch.inference_mode():
        if not seq2seq:
            out = model(**enc, output_attentions=True)
            stack = _stack(out.attentions, "self-attention")  # (L, H, T, T)
            causal = bool((torch.triu(stack, diagonal=1) == 0).all())
            name = "dec-self" if causal else "enc-self"
            return HFMaps({name: AttentionRecord(stack, tokens, None)}, cut=cut)
        seq = _decoder_sequence(model, tokenizer, enc, target, max_new_tokens)
        dec = torch.tensor([seq[:-1]])  # (1, T): the decoder input
        out = model(**enc, decoder_input_ids=dec, output_attentions=True)
    dec_tokens = tokenizer.convert_ids_to_tokens(seq[:-1])
    produced = tokenizer.convert_ids_to_tokens(seq[1:])
    maps = {
        "enc-self": AttentionRecord(_stack(out.encoder_attentions, "encoder"), tokens, None),
        "dec-self": AttentionRecord(_stack(out.decoder_attentions, "decoder"), dec_tokens, None),
        "cross": AttentionRecord(_stack(out.cross_attentions, "cross"), produced, tokens),
    }
    output = tokenizer.decode(seq[1:], skip_special_tokens=True)
    return HFMaps(maps, output=output, cut=cut)
