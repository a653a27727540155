"""Attention rollout and flow (Abnar & Zuidema 2020) against a two-layer example computed by
hand and against an independent max-flow written here (Edmonds-Karp on floats)."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnkit.viz import attention_flow, attention_rollout

# two layers over two tokens; with the residual, Ã_1 = [[1, 0], [.25, .75]] and
# Ã_2 = [[.75, .25], [0, 1]]
TWO_LAYERS = torch.tensor([[[1.0, 0.0], [0.5, 0.5]], [[0.5, 0.5], [0.0, 1.0]]])


def test_rollout_of_the_hand_example():
    # R_2 = Ã_2 · Ã_1 = [[.75 + .0625, .1875], [.25, .75]]
    out = attention_rollout(TWO_LAYERS)
    assert torch.allclose(out[0], torch.tensor([[1.0, 0.0], [0.25, 0.75]], dtype=torch.float64))
    assert torch.allclose(
        out[1], torch.tensor([[0.8125, 0.1875], [0.25, 0.75]], dtype=torch.float64)
    )


def test_flow_of_the_hand_example():
    # top token 0 reaches input 0 by (0)->(0)->(0) 0.75 and (0)->(1)->(0) 0.25: 1.0; input 1
    # only through (0)->(1)->(1), min(0.25, 0.75) = 0.25; top token 1 has one path to each
    raw = attention_flow(TWO_LAYERS, normalise=False)
    assert torch.allclose(raw, torch.tensor([[1.0, 0.25], [0.25, 0.75]], dtype=torch.float64))
    flow = attention_flow(TWO_LAYERS)
    assert torch.allclose(flow, torch.tensor([[0.8, 0.2], [0.25, 0.75]], dtype=torch.float64))


def test_heads_are_averaged_and_residual_zero_is_the_raw_product():
    w = torch.softmax(torch.randn(3, 4, 5, 5, generator=torch.Generator().manual_seed(0)), -1)
    mean = w.double().mean(1)  # (L, T, T)
    out = attention_rollout(w, residual=0.0)
    assert torch.allclose(out[-1], mean[2] @ mean[1] @ mean[0])
    assert torch.allclose(attention_rollout(w), attention_rollout(mean))


def _max_flow(cap: np.ndarray, s: int, t: int) -> float:
    """Edmonds-Karp on a dense float capacity matrix."""
    residual = cap.astype(np.float64).copy()
    total = 0.0
    while True:
        parent = {s: -1}
        queue = deque([s])
        while queue and t not in parent:
            u = queue.popleft()
            for v in np.nonzero(residual[u] > 1e-12)[0]:
                if int(v) not in parent:
                    parent[int(v)] = u
                    queue.append(int(v))
        if t not in parent:
            return total
        path, v = [], t
        while parent[v] != -1:
            path.append((parent[v], v))
            v = parent[v]
        push = min(residual[u, v] for u, v in path)
        for u, v in path:
            residual[u, v] -= push
            residual[v, u] += push
        total += push


@settings(max_examples=15, deadline=None)
@given(layers=st.integers(1, 3), t=st.integers(1, 4), seed=st.integers(0, 10_000))
def test_flow_equals_an_independent_max_flow(layers: int, t: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    w = torch.softmax(torch.randn(layers, 2, t, t, generator=g) * 3, -1)  # (L, H, T, T)
    mixed = 0.5 * w.double().mean(1) + 0.5 * torch.eye(t, dtype=torch.float64)
    n = (layers + 1) * t
    cap = np.zeros((n, n))
    for layer in range(1, layers + 1):
        cap[layer * t : (layer + 1) * t, (layer - 1) * t : layer * t] = mixed[layer - 1].numpy()
    want = np.array([[_max_flow(cap, layers * t + i, j) for j in range(t)] for i in range(t)])
    got = attention_flow(w, normalise=False).numpy()
    assert np.allclose(got, want, atol=1e-5)
    rows = attention_flow(w).sum(-1)
    assert torch.allclose(rows, torch.ones_like(rows))
    assert torch.allclose(attention_rollout(w)[-1].sum(-1), torch.ones(t, dtype=torch.float64))


@pytest.mark.parametrize(
    "weights, says",
    [
        (torch.rand(2, 3, 4), "as many keys as"),
        (torch.rand(5, 5), "(L, H, T, T)"),
        (torch.full((1, 2, 2), float("nan")), "finite"),
        (-torch.rand(1, 2, 2), "non-negative"),
    ],
)
def test_bad_weights_get_one_clear_line(weights: torch.Tensor, says: str):
    with pytest.raises(ValueError, match=None) as err:
        attention_rollout(weights)
    assert says in str(err.value)
    with pytest.raises(ValueError):
        attention_flow(weights)


def test_residual_out_of_range_is_refused():
    with pytest.raises(ValueError, match="residual"):
        attention_rollout(TWO_LAYERS, residual=1.0)


def test_view_through_rollout_and_flow(tmp_path, capsys):
    """`attnkit view --through` draws the rollout / flow of a stacked self-attention file and
    puts the combined map, not one layer's, into the page."""
    import json

    from attnkit.cli import main
    from attnkit.viz.weights_file import save_attention

    tokens = ["<s>", "the", "cat", "sat"]
    w = torch.softmax(torch.randn(3, 2, 4, 4, generator=torch.Generator().manual_seed(1)), -1)
    path = save_attention(tmp_path / "self.safetensors", w, tokens, None)
    for how, want in (("rollout", attention_rollout(w)[-1]), ("flow", attention_flow(w))):
        page = tmp_path / f"{how}.html"
        argv = ["view", "--weights", str(path), "--through", how, "--out", str(page)]
        assert main([*argv, "--png", str(tmp_path / f"{how}.png")]) == 0
        html = page.read_text(encoding="utf-8")
        data = json.loads(html.split('id="attn-data">')[1].split("</script>")[0])
        got = torch.tensor(data["weights"], dtype=torch.float64)
        assert torch.allclose(got.reshape(4, 4), want, atol=1e-6), how
        assert (tmp_path / f"{how}.png").stat().st_size > 0
    cross = save_attention(tmp_path / "x.safetensors", w[..., :3], tokens, tokens[:3])
    assert main(["view", "--weights", str(cross), "--through", "flow"]) == 2
    assert "cross-attention" in capsys.readouterr().err
