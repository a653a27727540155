"""The streaming experiment (Xiao 2023; experiments/streaming): its measurements against
explicit loops (each character predicted from the tokens its arm keeps, by a fresh forward
pass), its checks on planted numbers (each outcome; design checks on the compared arms only;
the calibration; the plateau cap), its settings."""

from __future__ import annotations

import math
import random

import pytest
import torch
import torch.nn.functional as F
from _refusals import refused

from attnkit.experiments.evidence import t_interval, verdict_of
from attnkit.experiments.streaming import StreamingConfig
from attnkit.experiments.streaming.checks import checks_of, reported_of
from attnkit.experiments.streaming.measure import (
    cached_nll,
    curve,
    dense_nll,
    past,
    recompute_nll,
    streams_of,
)
from attnkit.models import build_model

V, N = 12, 15


def tiny(layers: int = 1, position: str = "rope"):  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    return build_model("transformer-lm", src_vocab=4, tgt_vocab=V, dim=16, heads=2,
                       layers=layers, ff=16, dropout=0.0, position=position,
                       match_xl=False).double().eval()  # fmt: skip


STREAMS = torch.randint(1, V, (3, N), generator=torch.Generator().manual_seed(1))


def explicit(model, streams: torch.Tensor, context) -> torch.Tensor:  # type: ignore[no-untyped-def]
    """Nats of character t + 1 from a fresh forward over the ids ``context(t)`` (positions
    0 .. n-1), one stream and one character at a time."""
    out = torch.zeros(streams.shape[0], streams.shape[1] - 1, dtype=torch.float64)
    with torch.no_grad():
        for b in range(streams.shape[0]):
            for t in range(streams.shape[1] - 1):
                logits = model(streams[b, context(t)][None]).logits[0, -1]
                out[b, t] = F.cross_entropy(logits[None], streams[b, t + 1 : t + 2])
    return out


@pytest.mark.parametrize("position", ["rope", "alibi"])
@pytest.mark.parametrize("w,s", [(4, 0), (4, 2), (3, 4)])
def test_one_layer_cached_arms_predict_from_the_kept_tokens_renumbered(position, w, s):
    """One layer: a key depends on its token alone, so the cached arm at t is a fresh
    forward over the sinks and the last w tokens, numbered 0 .. n-1 (§3.2)."""
    model = tiny(position=position)
    kept = lambda t: [j for j in range(t + 1) if j < s or t - j < w]  # noqa: E731
    torch.testing.assert_close(cached_nll(model, STREAMS, w, s), explicit(model, STREAMS, kept),
                               rtol=1e-9, atol=1e-10)  # fmt: skip


def test_recomputation_runs_the_last_w_tokens_from_scratch():
    model = tiny(layers=2)
    last = lambda t: list(range(max(0, t - 3), t + 1))  # noqa: E731  w = 4
    torch.testing.assert_close(recompute_nll(model, STREAMS, 4), explicit(model, STREAMS, last),
                               rtol=1e-9, atol=1e-10)  # fmt: skip


def test_dense_attention_sees_the_whole_prefix():
    model = tiny(layers=2)
    prefix = lambda t: list(range(t + 1))  # noqa: E731
    torch.testing.assert_close(dense_nll(model, STREAMS), explicit(model, STREAMS, prefix),
                               rtol=1e-9, atol=1e-10)  # fmt: skip


def test_with_two_layers_the_cached_window_is_not_the_recomputation():
    """Past the first eviction the window's keys of layer 2 were computed from contexts
    the recomputation no longer has: the two differ (they agree before it)."""
    model = tiny(layers=2)
    a, b = cached_nll(model, STREAMS, 4, 0), recompute_nll(model, STREAMS, 4)
    torch.testing.assert_close(a[:, :4], b[:, :4], rtol=1e-9, atol=1e-10)
    assert not torch.allclose(a[:, 6:], b[:, 6:])


def test_streams_past_and_curve_by_hand():
    assert streams_of(torch.arange(10), 3).tolist() == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    nats = torch.tensor([[1.0, 2.0, 3.0, 4.0], [3.0, 2.0, 1.0, 0.0]]) * math.log(2)
    assert past(nats, 3) == pytest.approx([3.5, 0.5])  # targets 3 .. 4: columns 2, 3
    assert curve(nats, 3) == pytest.approx([2.0, 2.0])  # bins [0, 3), [3, 4)


def planted(gain: float, *, degrade: float = 0.5, learned: bool = True, seeds: int = 5,
            dense: float = 3.0):  # fmt: skip
    """5 seeds x 8 streams: the sinks arm near 1 bpc, recomputation 0.02 below it, the
    window ``gain`` above it, dense ``dense`` above it; the calibration seed's window
    ``degrade`` above its recomputation; every run stopped after 6 of a cap of 30 epochs."""
    rng = random.Random(0)
    base = [[1.0 + 0.05 * rng.random() for _ in range(8)] for _ in range(seeds)]
    shift = lambda rows, d: [[x + d + 0.01 * rng.random() for x in r] for r in rows]  # noqa: E731
    cal = [1.0 + 0.05 * rng.random() for _ in range(8)]
    return {
        "bits": {"sinks": base, "window": shift(base, gain), "recompute": shift(base, -0.02),
                 "dense": shift(base, dense)},
        "unigram": [4.0 if learned else 1.02] * seeds,
        "calibration": {"seed": 1000, "recompute": cal,
                        "window": [x + degrade + 0.01 * (rng.random() - 0.5) for x in cal]},
        "stops": [6] * seeds, "censored": [False] * seeds, "cap": 30, "sinks": 4,
    }  # fmt: skip


def test_the_checks_give_each_outcome():
    assert verdict_of(checks_of(planted(0.5))) == "REPRODUCED"
    worse = verdict_of(checks_of(planted(-0.3)))
    assert worse.startswith("NOT REPRODUCED: (i) bpc(window) - bpc(window + 4 sinks)"), worse
    n = planted(0.5)
    n["bits"]["window"] = [[x + (0.3 if s % 2 else -0.3) for x in r]
                           for s, r in enumerate(n["bits"]["sinks"])]  # fmt: skip
    assert verdict_of(checks_of(n)).startswith("INCONCLUSIVE: (i)")


def test_the_gap_is_a_t_interval_over_per_seed_means():
    n = planted(0.5)
    (i,) = [c for c in checks_of(n) if c.name.startswith("(i)")]
    gaps = [sum(w) / 8 - sum(s) / 8 for w, s in zip(n["bits"]["window"], n["bits"]["sinks"],
                                                     strict=True)]  # fmt: skip
    assert i.value == pytest.approx(sum(gaps) / 5)
    assert i.ci[0] == pytest.approx(t_interval(gaps).lo)


def test_the_reported_arms_withhold_nothing():
    """Dense attention blown up past L (or at the unigram floor) and the recomputation
    baseline anywhere are reported, not checked: the verdict is the compared arms'."""
    n = planted(0.5, dense=5000.0)
    assert verdict_of(checks_of(n)) == "REPRODUCED"
    n["bits"]["dense"] = [[4.0] * 8 for _ in range(5)]  # the unigram bpc: the floor
    n["bits"]["recompute"] = [[4.0] * 8 for _ in range(5)]
    assert verdict_of(checks_of(n)) == "REPRODUCED"
    names = [r["name"] for r in reported_of(n)]
    assert names == ["bpc(window + sinks (StreamingLLM)) - bpc(recomputation)",
                     "bpc(window, no sinks) - bpc(recomputation)",
                     "bpc(dense, past L) - bpc(recomputation)"]  # fmt: skip


def test_a_compared_arm_at_the_floor_is_inconclusive():
    verdict = verdict_of(checks_of(planted(0.5, learned=False)))
    assert verdict.startswith("INCONCLUSIVE: window + sinks (StreamingLLM) learnt"), verdict


def test_a_window_that_does_not_degrade_on_the_calibration_seed_is_inconclusive():
    verdict = verdict_of(checks_of(planted(-0.3, degrade=0.0)))
    assert verdict.startswith("INCONCLUSIVE: (calibration, seed 1000) window without sinks - "
                              "recomputation"), verdict  # fmt: skip
    assert "evicting the first tokens costs nothing" in verdict


def test_a_cap_within_three_median_stops_is_inconclusive():
    n = planted(0.5)
    n["stops"], n["censored"] = [12, 12, 15, 30, 30], [False, False, False, True, True]
    verdict = verdict_of(checks_of(n))
    assert verdict.startswith("INCONCLUSIVE: transformer-lm: cap / median stopping epoch: cap "
                              "30 / median stop 15 = 2, needs >= 3; 2 of 5 runs censored")


test_settings_that_cannot_test_the_claim_are_refused = refused(StreamingConfig, [
    ({"window": 64, "sinks": 4}, "the cache \\(sinks \\+ window\\) must fit the training length"),
    ({"position": "sinusoidal"}, "StreamingLLM renumbers a relative position stage"),
    ({"stream": 1}, "--stream 1: the stream must run past the training length"),
    ({"test_size": 1000}, "--test-size 1000: two streams of 512 characters"),
    ({"calibration_seed": 2}, "--calibration-seed 2 is one of the verdict's seeds"),
    ({"seeds": 1}, "--seeds 1: an interval over seeds needs 2 at least"),
])
