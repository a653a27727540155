"""attnkit.KVCache: preallocated, written in place; step by step equal, in float64, to the
full recomputation (full cache: the causal pass; a sliding window with sinks: the causal
pass under the mask (j < s) | (0 <= t - j < w)); its errors."""

import pytest
import torch

import attnkit
from attnkit import CausalAlignment, KVCache, SelfAttention
from attnkit.stages.position import ALiBi, RotaryPosition

pytestmark = pytest.mark.usefixtures("one_thread_module")
T = 17


def window_sinks_ref(t: int, w: int, s: int) -> torch.Tensor:
    """Which keys query i keeps, with loops: the first s, and the last w up to itself."""
    return torch.tensor([[j <= i and (j < s or i - j < w) for j in range(t)] for i in range(t)])


@pytest.mark.parametrize("position", [None, RotaryPosition(4), ALiBi(4)])
@pytest.mark.parametrize("kv_heads", [4, 2, 1])
@pytest.mark.parametrize("policy", [dict(capacity=T), dict(window=5, sinks=2),
                                    dict(window=4, sinks=0), dict(capacity=3, grow=True)])
def test_each_step_equals_the_full_recomputation(policy, kv_heads, position) -> None:
    torch.manual_seed(0)
    m = SelfAttention(16, 4, kv_heads=kv_heads, align=CausalAlignment(),
                      position=position).double().eval()  # fmt: skip
    x = torch.randn(2, T, 16, dtype=torch.float64)
    mask = None
    if "window" in policy:
        mask = window_sinks_ref(T, policy["window"], policy["sinks"])
    with torch.no_grad():
        ref = m(x, mask=mask).context  # (B, T, D)
        cache = m.new_cache(2, x, **policy)
        for t in range(T):
            r, same = m.step(x[:, t : t + 1], cache)
            assert same is cache
            torch.testing.assert_close(r.context[:, 0], ref[:, t], rtol=1e-10, atol=1e-12)
    assert cache.length == T
    if "window" in policy:  # O(s + w) memory, however long the sequence
        assert cache.capacity == policy["window"] + policy["sinks"]


def test_writes_in_place_and_the_old_tuple_cache_grows_by_copies() -> None:
    torch.manual_seed(0)
    m = SelfAttention(8, 2, align=CausalAlignment()).eval()
    x = torch.randn(1, 6, 8)
    cache = m.new_cache(1, x, capacity=6)
    before = cache.k.data_ptr()
    old = m.empty_cache(1, x)
    with torch.no_grad():
        for t in range(6):
            a, _ = m.step(x[:, t : t + 1], cache)
            b, old = m.step(x[:, t : t + 1], old)
            torch.testing.assert_close(a.context, b.context)
    assert cache.k.data_ptr() == before and cache.keys.shape == (1, 2, 6, 4)


@pytest.mark.parametrize("policy", [dict(capacity=9), dict(capacity=2, grow=True),
                                    dict(window=3, sinks=1), dict(window=3, renumber=True,
                                                                  sinks=2)])  # fmt: skip
def test_update_is_append_then_the_cached_views(policy) -> None:
    """``update`` (a decoding step's call) returns what ``append`` then ``keys``/``values``
    give, token by token and for a prefill of several, also after ``index_select`` changes
    the batch, and writes into the cache's own buffers."""
    torch.manual_seed(0)
    k, v = torch.randn(2, 2, 9, 3), torch.randn(2, 2, 9, 5)
    fast = KVCache(2, 2, 3, value_dim=5, **policy)
    slow = KVCache(2, 2, 3, value_dim=5, **policy)
    bounds = [(0, 2), *((t, t + 1) for t in range(2, 6))]
    for a, b in bounds:
        keys, values = fast.update(k[:, :, a:b], v[:, :, a:b])
        slow.append(k[:, :, a:b], v[:, :, a:b])
        assert torch.equal(keys, slow.keys) and torch.equal(values, slow.values)
        assert keys.data_ptr() == fast.k.data_ptr() and values.data_ptr() == fast.v.data_ptr()
        assert fast.length == slow.length == b
    rows = torch.tensor([1, 1, 0])  # beam search: three hypotheses from two
    fast, slow = fast.index_select(0, rows), slow.index_select(0, rows)
    for t in range(6, 9):
        keys, values = fast.update(k[rows, :, t : t + 1], v[rows, :, t : t + 1])
        slow.append(k[rows, :, t : t + 1], v[rows, :, t : t + 1])
        assert keys.shape[0] == 3
        assert torch.equal(keys, slow.keys) and torch.equal(values, slow.values)
        torch.testing.assert_close(fast.positions, slow.positions)


def test_a_prefill_writes_what_single_steps_write() -> None:
    g = torch.Generator().manual_seed(0)
    k, v = torch.randn(1, 2, 9, 3, generator=g), torch.randn(1, 2, 9, 3, generator=g)
    one, many = KVCache(1, 2, 3, window=3, sinks=2), KVCache(1, 2, 3, window=3, sinks=2)
    for t in range(9):
        one.append(k[:, :, t : t + 1], v[:, :, t : t + 1])
    many.append(k, v)
    assert torch.equal(one.keys, many.keys) and torch.equal(one.positions, many.positions)
    assert sorted(many.positions.tolist()) == [0, 1, 6, 7, 8]  # 2 sinks, the last 3


def test_beam_search_selects_rows() -> None:
    c = KVCache(2, 1, 2, capacity=4)
    c.append(torch.arange(2.0)[:, None, None, None].expand(2, 1, 1, 2),
             torch.zeros(2, 1, 1, 2))  # fmt: skip
    picked = c.index_select(0, torch.tensor([1, 1, 0]))
    assert picked.keys[:, 0, 0, 0].tolist() == [1.0, 1.0, 0.0] and picked.length == 1
    assert c.keys.shape[0] == 2  # the original is left as it was


def test_cross_attention_keys_are_projected_once_and_fixed() -> None:
    m = attnkit.CrossAttention(8, 2, kv_heads=1)
    memory = torch.randn(2, 5, 8)
    cache = KVCache.fixed(*m.project_keys(memory))  # (B, Hkv, S, Dh) each
    q = torch.randn(2, 3, 8)
    out = m.attend_projected(q, cache.keys, cache.values)
    torch.testing.assert_close(out.context, m(q, memory).context)
    with pytest.raises(ValueError, match="takes no new tokens"):
        cache.append(cache.keys, cache.values)


@pytest.mark.parametrize(
    "call, fix",
    [
        (lambda: KVCache(1, 1, 2, capacity=2).append(torch.zeros(1, 1, 3, 2),
                                                      torch.zeros(1, 1, 3, 2)),
         "give a larger capacity, window=w"),  # fmt: skip
        (lambda: KVCache(1, 1, 2), "give the most tokens the cache holds"),
        (lambda: KVCache(1, 1, 2, capacity=4, sinks=1), "give window=w too"),
        (lambda: KVCache(1, 1, 2, window=0), "window >= 1"),
        (lambda: KVCache(1, 2, 2, capacity=4).append(torch.zeros(1, 4, 1, 2),
                                                      torch.zeros(1, 4, 1, 2)),
         "KVCache.like"),  # fmt: skip
        (lambda: KVCache(1, 1, 2, capacity=4).append(torch.zeros(1, 1, 1, 2),
                                                      torch.zeros(1, 1, 1, 1)),
         "give one value row per key"),  # fmt: skip
        (lambda: KVCache(1, 1, 2, capacity=4).update(torch.zeros(1, 1, 1, 2),
                                                      torch.zeros(1, 1, 1, 1)),
         "give one value row per key"),  # fmt: skip
    ],
)
def test_errors_say_what_to_do(call, fix: str) -> None:
    with pytest.raises(ValueError, match=fix):
        call()


def test_transformer_decodes_with_the_cache() -> None:
    from attnkit.decode.search import greedy
    from attnkit.models import build_model

    torch.manual_seed(0)
    m = build_model("transformer", src_vocab=20, tgt_vocab=20, preset="tiny").eval()
    src, src_len = torch.randint(3, 20, (2, 3)), torch.tensor([3, 2])
    memory = m.encode(src, src_len)
    state = m.init_state(memory)
    assert all(isinstance(c, KVCache) for c in state) and state[0].capacity == 16
    with torch.no_grad():
        for _ in range(20):  # past 2S + 10 = 16 positions: the cache doubles
            _, _, state = m.step(torch.tensor([5, 6]), state, memory)
    assert state[0].length == 20 and state[0].capacity == 32
    assert len(greedy(m, src, src_len, max_len=40).tokens) == 2


@pytest.mark.parametrize("position", ["sinusoidal", "rope", "alibi"])
@pytest.mark.parametrize("policy", [{}, dict(window=4, sinks=2)])
def test_lm_generation_with_the_cache_equals_the_full_recomputation(position, policy) -> None:
    from attnkit.models import build_model

    torch.manual_seed(0)
    lm = build_model("transformer-lm", src_vocab=30, tgt_vocab=30, preset="tiny",
                     position=position, kv_heads=1).double().eval()  # fmt: skip
    ids = torch.randint(1, 30, (2, 12))
    mask = window_sinks_ref(12, policy["window"], policy["sinks"]) if policy else None
    with torch.no_grad():
        if mask is None:
            full = lm(ids).logits  # (B, T, V)
        else:  # the same layers under the window-and-sinks mask
            x = lm.embed(ids)
            for layer in lm.layers:
                h = layer.res1.inner(x)
                x = layer.res1.merge(x, layer.attn(h, mask=mask, need_weights=False).context)
                x, _ = layer.res2(x, layer.ffn)
            full = torch.nn.functional.linear(lm.norm(x), lm.emb.weight, lm.out_bias)
        state = None
        for t in range(12):
            logits, state = lm.step(ids[:, t], state, t, **policy)
            torch.testing.assert_close(logits, full[:, t], rtol=1e-9, atol=1e-10)
    assert all(isinstance(c, KVCache) for c in state)


def kept(t: int, w: int, s: int) -> list[int]:
    """The tokens a window of w with s sinks holds when token t is decoded."""
    return [j for j in range(t + 1) if j < s or t - j < w]


def test_renumbered_positions_are_the_papers_example() -> None:
    """Xiao et al. 2023, §3.2: a cache holding tokens [0, 1, 2, 3, 6, 7, 8] and decoding 9
    assigns positions [0, 1, ..., 7], not [0, 1, 2, 3, 6, 7, 8, 9]."""
    text, cache = KVCache(1, 1, 2, window=4, sinks=4), KVCache(1, 1, 2, window=4, sinks=4,
                                                                renumber=True)  # fmt: skip
    for c in (text, cache):
        for _ in range(10):
            c.append(torch.zeros(1, 1, 1, 2), torch.zeros(1, 1, 1, 2))
    by_text = sorted(zip(text.positions.tolist(), cache.positions.tolist(), strict=True))
    assert by_text == [(0, 0), (1, 1), (2, 2), (3, 3), (6, 4), (7, 5), (8, 6), (9, 7)]
    assert (text.newest, cache.newest) == (9, 7)


@pytest.mark.parametrize("position", [RotaryPosition(4), ALiBi(4)])
@pytest.mark.parametrize("w,s", [(5, 2), (4, 0), (3, 4)])
def test_a_renumbered_step_equals_attention_over_the_kept_tokens_alone(position, w, s) -> None:
    """With positions within the cache, step t is the causal pass over the kept tokens
    alone, numbered 0 .. n-1 (the query last): their distances never exceed s + w."""
    torch.manual_seed(0)
    m = SelfAttention(16, 4, align=CausalAlignment(), position=position).double().eval()
    x = torch.randn(2, T, 16, dtype=torch.float64)
    with torch.no_grad():
        cache = m.new_cache(2, x, window=w, sinks=s, renumber=True)
        for t in range(T):
            r, _ = m.step(x[:, t : t + 1], cache)
            ref = m(x[:, kept(t, w, s)]).context[:, -1]  # positions 0 .. n-1
            torch.testing.assert_close(r.context[:, 0], ref, rtol=1e-10, atol=1e-12)


def test_a_one_layer_lm_streams_with_renumbered_sinks() -> None:
    """One layer: a token's key depends on the token alone, so the step's logits at t are
    the LM's own forward over the kept tokens; with text positions (the default) they are
    not, once a token was evicted."""
    from attnkit.models import build_model

    torch.manual_seed(0)
    lm = build_model("transformer-lm", src_vocab=30, tgt_vocab=30, dim=16, heads=2, layers=1,
                     ff=32, dropout=0.0, position="rope").double().eval()  # fmt: skip
    ids = torch.randint(1, 30, (2, 14))
    with torch.no_grad():
        renumbered = text = None
        for t in range(14):
            a, renumbered = lm.step(ids[:, t], renumbered, t, window=4, sinks=2, renumber=True)
            b, text = lm.step(ids[:, t], text, t, window=4, sinks=2)
            ref = lm(ids[:, kept(t, 4, 2)]).logits[:, -1]
            torch.testing.assert_close(a, ref, rtol=1e-9, atol=1e-10)
            assert torch.allclose(b, ref) == (t < 6)  # the first eviction is at t = 6
    with pytest.raises(ValueError, match="renumber=True numbers a sliding window's tokens"):
        lm.step(ids[:, 0], None, 0, renumber=True)
    with pytest.raises(ValueError, match="renumber=True renumbers the tokens kept by a sliding"):
        KVCache(1, 1, 2, capacity=4, renumber=True)
