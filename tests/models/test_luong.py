"""Luong 2015: every score x alignment runs, padding and local windows get zero weight,
local-p's centre follows eq. 9, training lowers the loss, checkpoints round-trip."""

import itertools

import _seq2seq as seq2seq
import pytest
import torch

from attnkit.models import build_model, make_config, parse_options
from attnkit.models.luong import ALIGN_NAMES, SCORE_NAMES, LuongConfig

pytestmark = pytest.mark.usefixtures("one_thread_module")

V_SRC, V_TGT, D = 23, 29, 2
LENGTHS = torch.tensor([9, 6, 3])


def batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, V_SRC, (3, 9), generator=g)  # (B, S)
    src[torch.arange(9)[None, :] >= LENGTHS[:, None]] = 0  # padding
    tgt = torch.randint(3, V_TGT, (3, 8), generator=g)  # (B, T); T > S + D on row 2
    return src, LENGTHS.clone(), tgt


def model(**kw):
    torch.manual_seed(0)
    kw = {"preset": "tiny", "window": D, **kw}
    return build_model("luong", src_vocab=V_SRC, tgt_vocab=V_TGT, **kw).eval()


@pytest.mark.parametrize("score,align", list(itertools.product(SCORE_NAMES, ALIGN_NAMES)))
def test_every_score_and_alignment_runs(score: str, align: str) -> None:
    m = model(score=score, align=align, cell="gru" if score == "dot" else "lstm", layers=2)
    src, src_len, tgt = batch()
    out = m(src, src_len, tgt)
    assert out.logits.shape == (3, 8, V_TGT) and out.weights is not None
    w = out.weights  # (B, T, S)
    assert w.shape == (3, 8, 9) and torch.isfinite(out.logits).all()
    pad = torch.arange(9)[None, None, :] >= src_len[:, None, None]  # (B, 1, S)
    assert (w.masked_select(pad.expand_as(w)) == 0).all()  # padding gets no attention
    if align == "global":
        torch.testing.assert_close(w.sum(-1), torch.ones(3, 8))
    out.logits.sum().backward()  # every part is differentiable


def test_local_m_window_follows_the_decoder_step() -> None:
    m = model(align="local-m")
    src, src_len, tgt = batch()
    with torch.no_grad():
        w = m(src, src_len, tgt).weights  # (B, T, S)
    assert w is not None
    t = torch.arange(8)[:, None]  # (T, 1)
    s = torch.arange(9)[None, :]  # (1, S)
    outside = (s - t).abs() > D  # (T, S): p_t = t
    assert (w[:, outside] == 0).all()
    real = s < src_len[:, None, None]  # (B, 1, S)
    inside = ~outside & real  # (B, T, S)
    rows = inside.any(-1)  # (B, T): steps whose window meets the source
    torch.testing.assert_close(w.sum(-1)[rows], torch.ones(int(rows.sum())))
    assert (w.sum(-1)[~rows] == 0).all()  # t > S + D: empty window, zero weights, no NaN
    assert bool((~rows).any())  # the batch does reach past the source


def test_local_p_position_is_eq9_and_window_is_respected() -> None:
    m = model(align="local-p")
    src, src_len, tgt = batch()
    seen: list[tuple[torch.Tensor, torch.Tensor]] = []
    hook = m.attention.register_forward_hook(
        lambda mod, args, out: seen.append((args[0].detach(), out.extras["position"].detach()))
    )
    with torch.no_grad():
        w = m(src, src_len, tgt).weights  # (B, T, S)
    hook.remove()
    assert w is not None and len(seen) == 8
    a = m.attention.align  # attnkit's LocalP, built by the registry
    s = torch.arange(9, dtype=torch.float64)
    for t, (h_t, p) in enumerate(seen):  # h_t (B, 1, n), p (B, 1)
        h = h_t[:, 0].double()  # (B, n)
        expect = src_len.double() * torch.sigmoid(
            torch.tanh(h @ a.w_p.double().T) @ a.v_p.double()
        )  # eq. 9 with S the real source length
        torch.testing.assert_close(p[:, 0].double(), expect, rtol=1e-5, atol=1e-5)
        outside = (s[None, :] - expect[:, None]).abs() > D + 1e-4  # (B, S)
        assert (w[:, t][outside] == 0).all()
        # inside the window: softmax over the window times the Gaussian prior (σ = D/2)
        inside = ~outside & (s[None, :] < src_len[:, None])
        prior = torch.exp(-((s[None, :] - expect[:, None]) ** 2) / (2 * (D / 2) ** 2))
        ratio = w[:, t].double() / prior  # (B, S) = the normalised scores inside the window
        sums = torch.where(inside, ratio, 0).sum(-1)
        torch.testing.assert_close(
            sums[inside.any(-1)],
            torch.ones(int(inside.any(-1).sum())).double(),
            rtol=1e-4,
            atol=1e-4,
        )


def test_forward_equals_step_by_step_and_input_feeding_matters() -> None:
    m = model(align="local-m", score="concat")
    seq2seq.steps_equal_forward(m, *batch())
    plain = model(align="local-m", score="concat", input_feeding=False)
    assert plain.decoder.cells[0].input_size == m.decoder.cells[0].input_size - 32


@pytest.mark.parametrize("align", ALIGN_NAMES)
def test_step_by_step_equals_the_teacher_forced_pass(align: str) -> None:
    """Decoding one query at a time, at position t (its step), gives what one attention over
    all T decoder states at positions 0 .. T-1 gives: the same weights and contexts for
    global, local-m and local-p (the fast kernels included); and step() replays forward()."""
    m = model(align=align, score="general")
    src, src_len, tgt = batch()
    seen: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
    hook = m.attention.register_forward_hook(
        lambda mod, args, out: seen.append((args[0], out.context, out.weights))
    )
    with torch.no_grad():
        out = m(src, src_len, tgt)  # teacher forcing, one step() per target position
        hook.remove()
        memory = m.encode(src, src_len)
        h = torch.cat([q for q, _, _ in seen], dim=1)  # h_1 .. h_T (B, T, n)
        full = m.attention(h, memory["keys"], mask=memory["mask"])  # T queries at 0 .. T-1
        fast = m.attention(h, memory["keys"], mask=memory["mask"], need_weights=False)
        state = m.init_state(memory)
        for t in range(tgt.shape[1]):
            logits, w, state = m.step(tgt[:, t], state, memory)
            torch.testing.assert_close(logits, out.logits[:, t])
            torch.testing.assert_close(w, out.weights[:, t])
    assert len(seen) == tgt.shape[1] and full.weights is not None
    torch.testing.assert_close(full.weights, torch.cat([w for _, _, w in seen], dim=1))
    torch.testing.assert_close(full.context, torch.cat([c for _, c, _ in seen], dim=1))
    torch.testing.assert_close(fast.context, full.context)
    torch.testing.assert_close(out.weights, full.weights)


def test_registry_names_configure_the_model() -> None:
    for name in ("concat", "additive", "bahdanau"):  # one variant, by the registry's aliases
        assert model(score=name).attention.score.name == "additive"
    assert model(align="local-p").attention.align.window == D
    with pytest.raises(ValueError, match=r"LuongConfig.align='local-q'.*choose one of"):
        LuongConfig(10, 10, align="local-q")
    with pytest.raises(ValueError, match=r"LuongConfig.score='cosine'.*choose one of"):
        LuongConfig(10, 10, score="cosine")  # an attnkit score, but not Luong 2015's
    with pytest.raises(ValueError, match=r"LuongConfig.window=-1.*local-m"):
        LuongConfig(10, 10, align="local-m", window=-1)


def test_config_errors_say_what_to_do() -> None:
    with pytest.raises(ValueError, match="choose one of"):
        LuongConfig(10, 10, score="additive-ish")
    with pytest.raises(ValueError, match="local-p"):
        LuongConfig(10, 10, align="local-p", window=0)
    with pytest.raises(ValueError, match="lstm"):
        make_config("luong", src_vocab=5, tgt_vocab=5, cell="rnn")
    with pytest.raises(ValueError, match="max_src_len"):
        m = model(score="location", max_src_len=4)
        m(*batch())
    assert parse_options("luong", ["score=dot", "layers=3", "input_feeding=false"]) == {
        "score": "dot",
        "layers": 3,
        "input_feeding": False,
    }
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_options("luong", ["heads=4"])
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_options("luong", ["src_vocab=4"])
    with pytest.raises(ValueError, match="takes a int"):
        parse_options("luong", ["layers=two"])


def test_training_lowers_the_loss_and_checkpoint_round_trips(tmp_path) -> None:
    run = seq2seq.train_toy_ko("luong", tmp_path, epochs=3, lr=1e-2, align="local-p")
    losses = run.losses
    assert losses == sorted(losses, reverse=True) and losses[-1] < 0.8 * run.before, losses
    loaded = seq2seq.reloads_to_the_same_logits(run, tmp_path)
    assert loaded.model_name == "luong" and loaded.model.config == run.model.config


def test_cli_trains_and_translates_with_options(tmp_path, capsys) -> None:
    options = {"align": "local-m", "cell": "gru", "score": "dot"}
    seq2seq.trains_and_translates_from_the_cli("luong", options, tmp_path / "run", capsys)


def test_reversed_source_is_read_right_to_left_and_put_back_in_place() -> None:
    """reverse_source (Luong 2015, Table 1 "+reverse"): the encoder reads x_S .. x_1 <eos>;
    h̄_s is the state just after reading x_s, stored at x_s's position. Checked against the
    same GRU run on each row's words reversed by hand."""
    from attnkit.models.luong import reversed_words

    lengths = torch.tensor([5, 3, 1])  # eos included; the last row is eos alone
    order = reversed_words(lengths, 5)
    assert order.tolist() == [[3, 2, 1, 0, 4], [1, 0, 2, 3, 4], [0, 1, 2, 3, 4]]
    assert (order.gather(1, order) == torch.arange(5)).all()  # its own inverse
    m = model(align="global", cell="gru", reverse_source=True)
    src = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0], [2, 0, 0, 0, 0]])
    with torch.no_grad():
        keys = m.encode(src, lengths)["keys"]  # (B, S, n)
        for b, n in enumerate(lengths.tolist()):
            words = src[b, : n - 1].flip(0).tolist() + [src[b, n - 1].item()]
            states, _, _ = m.encoder(torch.tensor([words]), torch.tensor([n]))  # (1, n, h)
            for s in range(n - 1):  # x_s was read at step n-2-s
                torch.testing.assert_close(keys[b, s], states[0, n - 2 - s])
            torch.testing.assert_close(keys[b, n - 1], states[0, n - 1])  # eos: read last
        forward = model(align="global", cell="gru").encode(src, lengths)["keys"]
    assert not torch.allclose(keys[0, :4], forward[0, :4])  # the reading does change h̄
    with pytest.raises(ValueError, match="reverse_source"):
        LuongConfig(10, 10, reverse_source="yes")  # type: ignore[arg-type]
