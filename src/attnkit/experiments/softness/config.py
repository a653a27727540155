"""The rows of the softness experiment (softness.py): each a softness of the latent decoders
(models/latent.py) and, for variational attention, its estimator."""

from __future__ import annotations

ROWS: dict[str, dict[str, str]] = {
    "mean": {"softness": "mean"},
    "soft": {"softness": "soft"},
    "exact": {"softness": "exact"},
    "hard": {"softness": "hard"},
    "gumbel": {"softness": "gumbel"},
    "variational": {"softness": "variational", "estimator": "enumerate"},
    "variational-sample": {"softness": "variational", "estimator": "sample"},
}
VARIATIONAL = ("variational", "variational-sample")
# Deng 2018 Table 1's rows (variational = the enumerated estimator): toy-ko's default
DENG_ROWS = ("soft", "exact", "hard", "variational", "variational-sample")


__all__ = ["DENG_ROWS", "ROWS", "VARIATIONAL"]
