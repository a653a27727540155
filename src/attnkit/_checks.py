"""Input checks for the public entry points: every error says what was wrong and what to do.

Two levels (``set_checks``, or the environment variable ATTNKIT_CHECKS read at import):

    "shapes" (default)  types, dtypes, shapes, mask polarity: read from the tensors' metadata
                        only, so free, and never a host synchronisation on a GPU
    "full"              also the data: NaN/Inf in query, keys or values (and scores that
                        overflow) raise a ValueError naming the tensor. Each such check reads a
                        value back to the host: free on CPU, one device synchronisation each on
                        a GPU (dozens per training step), and a graph break under torch.compile

Legend: B batch, Tq queries, Tk keys, Dq/Dk/Dv query/key/value widths.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from torch import Tensor

from . import _env

CHECKS = ("shapes", "full")


def _mode_of(value: str, where: str) -> str:
    if value not in CHECKS:
        raise ValueError(f"{where}={value!r}; choose 'shapes' (free, the default) or 'full' "
                         "(also NaN/Inf in the data, one host sync per check)")  # fmt: skip
    return value


def _mode_from_env() -> str | ValueError:
    """ATTNKIT_CHECKS's level, or the error that its value gets: raised at the first call that
    uses the level (importing attnkit never fails on it; the command line says it at once)."""
    try:
        return _env.checks_level()
    except ValueError as err:
        return err


_mode: str | ValueError = _mode_from_env()


def set_checks(mode: str) -> str:
    """Choose how much every attention call checks: "shapes" (default: metadata only, no host
    sync) or "full" (also NaN/Inf in the inputs, a ValueError naming the tensor; one host sync
    per check on a GPU). Returns the previous mode. ``attend(..., check_finite=True|False)``
    overrides it for one call."""
    global _mode
    previous = _mode if isinstance(_mode, str) else "shapes"
    _mode = _mode_of(mode, "set_checks(mode)")
    return previous


def get_checks() -> str:
    """The current check level: "shapes" or "full" (see ``set_checks``); a ValueError naming
    ATTNKIT_CHECKS when its value is not one of them."""
    if isinstance(_mode, ValueError):
        raise ValueError(str(_mode))
    return _mode


@contextmanager
def checks(mode: str) -> Iterator[None]:
    """``with attnkit.checks("full"): ...`` — ``set_checks`` for a block, restored after."""
    previous = set_checks(mode)
    try:
        yield
    finally:
        set_checks(previous)


def finite_wanted(check_finite: bool | None) -> bool:
    """A call's ``check_finite`` (True / False), or the global level when it is None."""
    return get_checks() == "full" if check_finite is None else check_finite


def check_tensor(name: str, x: object, *, min_dim: int = 2) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(
            f"{name} has dtype {x.dtype}; attention needs floating-point inputs: "
            f"convert with {name}.float()"
        )
    if x.dim() < min_dim:
        raise ValueError(
            f"{name} has shape {tuple(x.shape)}; expected at least {min_dim} dims (..., T, D)"
        )
    return x


def check_finite(name: str, x: Tensor) -> None:
    # one reduction first: a NaN or Inf anywhere makes the sum non-finite, so a finite sum
    # proves the tensor finite without the elementwise pass and its bool tensor
    # (docs/perf/log-performance.md, "Figures behind the code's choices"); only a non-finite sum (or
    # an overflow) pays for the exact elementwise check
    if bool(torch.isfinite(x.sum())):
        return
    if not bool(torch.isfinite(x).all()):
        raise ValueError(
            f"{name} contains NaN or Inf; attention would propagate it. "
            f"Find where it came from (torch.isfinite({name}) shows where), "
            "or turn this check off (check_finite=False, or attnkit.set_checks('shapes'))"
        )


def check_qkv(
    query: Tensor, keys: Tensor, values: Tensor, *, finite: bool | None = None
) -> None:
    """Shapes: query (..., Tq, Dq), keys (..., Tk, Dk), values (..., Tk, Dv). ``finite``:
    also NaN/Inf in the data (None: as ``set_checks`` says)."""
    for name, x in (("query", query), ("keys", keys), ("values", values)):
        check_tensor(name, x)
    if not (query.device == keys.device == values.device):
        raise ValueError(
            f"query, keys and values are on {query.device}, {keys.device}, {values.device}; "
            "move them to one device (x.to(query.device))"
        )
    check_one_dtype(query, keys, values)
    if not (query.shape[:-2] == keys.shape[:-2] == values.shape[:-2]):
        raise ValueError(
            f"batch dims differ: query {tuple(query.shape)}, keys {tuple(keys.shape)}, "
            f"values {tuple(values.shape)}; the dims before (T, D) must be equal"
        )
    if keys.shape[-2] != values.shape[-2]:
        raise ValueError(
            f"keys have Tk={keys.shape[-2]} but values have {values.shape[-2]} positions "
            f"(keys {tuple(keys.shape)}, values {tuple(values.shape)}); each key needs one value"
        )
    if keys.shape[-2] == 0:
        raise ValueError(
            f"empty key sequence (keys {tuple(keys.shape)}): there is nothing to attend to; "
            "give at least one key, or mask the query row out instead"
        )
    if finite_wanted(finite):
        check_finite("query", query)
        check_finite("keys", keys)
        check_finite("values", values)


def check_one_dtype(query: Tensor, keys: Tensor, values: Tensor) -> None:
    """A TypeError unless query, keys and values share one dtype."""
    if not (query.dtype == keys.dtype == values.dtype):
        raise TypeError(
            f"query, keys and values have dtypes {query.dtype}, {keys.dtype}, {values.dtype}; "
            "cast them to one dtype"
        )


def broadcasts_to(shape: tuple[int, ...] | torch.Size, target: tuple[int, ...]) -> bool:
    """``shape`` broadcasts *to* ``target`` without growing it."""
    shape, target = tuple(shape), tuple(target)
    if len(shape) > len(target):
        return False
    # each trailing-aligned dim is 1 or the target's: torch.broadcast_shapes(shape, target)
    # == target, without its generic helper (slow next to a decoding step, which calls this
    # once per layer; docs/perf/log-performance.md, "Figures behind the code's choices")
    tail = target[len(target) - len(shape) :]
    return all(s == 1 or s == t for s, t in zip(shape, tail, strict=True))


def check_positions(positions: Tensor | None, shape: tuple[int, ...]) -> None:
    """Query positions are a real or integer tensor broadcastable to (..., Tq)."""
    if positions is None:
        return
    if not isinstance(positions, Tensor) or positions.dtype == torch.bool:
        raise TypeError(
            "positions must be an integer or float torch.Tensor (..., Tq) of query positions, "
            f"got {getattr(positions, 'dtype', type(positions).__name__)}"
        )
    if not broadcasts_to(positions.shape, shape):
        raise ValueError(
            f"positions has shape {tuple(positions.shape)}, which does not broadcast to the "
            f"queries {shape} (..., Tq); give one position per query, e.g. torch.arange(Tq) "
            "or a decoder's step t as (B, 1)"
        )


def check_mask(
    mask: Tensor | None, scores_shape: tuple[int, ...], device: torch.device | None = None
) -> Tensor | None:
    """A mask is boolean, True = may attend, broadcasts to scores (..., Tq, Tk) and, when
    ``device`` is given, lies on the scores' device."""
    if mask is None:
        return None
    if not isinstance(mask, Tensor):
        raise TypeError(f"mask must be a bool torch.Tensor or None, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(
            f"mask has dtype {mask.dtype}; attnkit masks are bool with True = may attend. "
            "Convert with mask.bool() (or ~mask.bool() if yours marks positions to ignore)"
        )
    if not broadcasts_to(mask.shape, scores_shape):  # never grows the scores
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the scores' shape "
            f"{tuple(scores_shape)} (..., Tq, Tk); a padding mask is (B, 1, Tk): "
            "see attnkit.masks.padding_mask"
        )
    if device is not None and mask.device != device:
        raise ValueError(
            f"mask is on {mask.device} but the attention runs on {device}; move it there "
            "(mask.to(query.device)), or build it from tensors on that device"
        )
    return mask


def check_window(name: str, value: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name}={value} is negative; a window radius must be >= 0")
    return value


def check_width(name: str, got: int, expected: int, hint: str) -> None:
    if got != expected:
        raise ValueError(f"{name} has width {got} but {expected} was expected; {hint}")


def check_size(name: str, value: object, *, optional: bool = False) -> None:
    """A width or count argument of a constructor is a positive int (None too when optional)."""
    if value is None and optional:
        return
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name}={value}; a width must be a positive int (e.g. {name}=64)")


def check_dtype(module: torch.nn.Module, **inputs: Tensor) -> None:
    """Floating inputs have the dtype of the module's floating weights (outside autocast,
    which casts them itself): a float64 query into a float32 module is a ValueError naming
    both and the two ways to fix it, not a matmul error from deep inside torch."""
    weight = next((p for p in module.parameters() if p.is_floating_point()), None)
    if weight is None:
        return
    for name, x in inputs.items():
        if not x.is_floating_point() or x.dtype == weight.dtype:
            continue
        if torch.is_autocast_enabled(x.device.type):
            return
        raise ValueError(
            f"{name} is {str(x.dtype).removeprefix('torch.')} but this module's weights are "
            f"{str(weight.dtype).removeprefix('torch.')}; convert one to the other: "
            f"module.to({x.dtype}) or {name}.to({weight.dtype})"
        )


def as_stack(weights: Any) -> np.ndarray:
    """weights (Tq, Tk) | (H, Tq, Tk) | (L, H, Tq, Tk), torch or numpy, any float dtype ->
    float64 array (L, H, Tq, Tk): the input of the viewers and the alignment metrics."""
    if hasattr(weights, "detach"):  # a torch tensor
        weights = weights.detach().to("cpu").double().numpy()
    arr = np.asarray(weights, dtype=np.float64)
    if arr.ndim == 2:
        arr = arr[None, None]  # (1, 1, Tq, Tk)
    elif arr.ndim == 3:
        arr = arr[None]  # (1, H, Tq, Tk)
    elif arr.ndim != 4:
        raise ValueError(
            f"weights must be (Tq, Tk), (H, Tq, Tk) or (L, H, Tq, Tk); got shape "
            f"{tuple(arr.shape)}. For a batch, pass one example: weights[b]"
        )
    if not np.isfinite(arr).all():
        raise ValueError("weights contain NaN or inf; check the model's masks and inputs")
    return arr


class FieldError(ValueError):
    """A config value that cannot be, said with the names of the fields it is about.

    ``template`` names a field as ``{out}`` and a field with its value as ``{train_size=}``;
    ``values`` holds the values. ``str(err)`` says it to a library user, in field names
    (``out is empty``, ``train_size=0; ...``); ``err.say(flag)`` says it with each field that
    ``flag(field)`` names by a flag (``--out is empty``, ``--train-size 0; ...``): the CLI
    passes its own flags."""

    def __init__(self, template: str, values: Mapping[str, Any]) -> None:
        self.template, self.values = template, dict(values)
        super().__init__(self.say())

    def say(self, flag: Callable[[str], str | None] = lambda field: None) -> str:
        """The message, each field named by ``flag(field)`` when that is not None."""
        values = self.values

        class Named(dict[str, str]):
            def __missing__(self, key: str) -> str:
                field, with_value = key.removesuffix("="), key.endswith("=")
                name = flag(field)
                if not with_value:
                    return name or field
                return f"{name} {values[field]!r}" if name else f"{field}={values[field]!r}"

        return self.template.format_map(Named())

    def __reduce__(self) -> tuple[Any, ...]:  # picklable across processes, as ValueError is
        return (type(self), (self.template, self.values))


def check_ranges(
    config: object,
    *,
    positive: Iterable[str] = (),
    non_negative: Iterable[str] = (),
    fractions: Iterable[str] = ("dropout",),
    as_flags: bool = False,
) -> None:
    """The range checks of a config dataclass's ``__post_init__``: each field named in
    ``positive`` is >= 1, in ``non_negative`` >= 0, in ``fractions`` in [0, 1) (dropout).
    The first field out of range raises a ValueError that names it:
    ``RNNSearchConfig.emb=0; it must be >= 1``; with ``as_flags`` (a config whose fields are
    command-line flags, as an experiment's) it names the flag: ``--seeds 0; it must be >= 1``."""
    cls = type(config).__name__
    for names, ok, rule in (
        (positive, lambda v: v >= 1, ">= 1"),
        (non_negative, lambda v: v >= 0, ">= 0"),
        (fractions, lambda v: 0.0 <= v < 1.0, "in [0, 1)"),
    ):
        for name in names:
            value = getattr(config, name)
            if not ok(value):
                flag = f"--{name.replace('_', '-')} {value}"
                subject = flag if as_flags else f"{cls}.{name}={value}"
                raise ValueError(f"{subject}; it must be {rule}")


def unreadable_safetensors(path: object, err: Exception, what_to_do: str) -> ValueError:
    """The one-line error for a safetensors file that ``safe_open`` could not read (its
    SafetensorError is not importable as a class on every version): the path, the first line
    of ``err``, and ``what_to_do``."""
    first = str(err).splitlines()[0] if str(err) else type(err).__name__
    return ValueError(f"{path} is not a readable safetensors file ({first}); {what_to_do}")
