"""digit-qa with coattention="stacked" (Yang, He, Gao, Deng & Smola 2016, "Stacked Attention
Networks for Image Question Answering", §3.3): the model's forward equals a float64 reference
written from the paper's equations for 1 and 2 hops; gradcheck in float64 on a tiny config;
each hop's weights sum to one over the patches; hops < 1 is one clear line; it trains."""

import pytest
import torch
import torch.nn.functional as F

from attnkit.data.tasks import load_task
from attnkit.data.vocab import Vocab
from attnkit.models import build_model
from attnkit.models.digit_qa import DigitQAConfig
from attnkit.tasks.qa import make_batch

pytestmark = pytest.mark.usefixtures("one_thread_module")


def _tiny(hops=2, **kw):
    cfg = DigitQAConfig(src_vocab=12, tgt_vocab=5, dim=6, hidden=5, channels=3,
                        coattention="stacked", hops=hops, **kw)  # fmt: skip
    return build_model("digit-qa", cfg)


def _inputs():
    image = torch.rand(2, 1, 16, 16, dtype=torch.float64)  # a 4 x 4 patch grid
    question = torch.tensor([[4, 5, 6, 0, 0], [7, 8, 9, 10, 11]])
    return image, question, torch.tensor([3, 5])


def reference_logits(model, image, question, q_len):
    """The paper's answer from u^K, in float64, one example at a time, regions as columns:

        v_Q = [h→_T; h←_1]   (d,)        the question LSTM's summary, u⁰ = v_Q
        h_A = tanh(W_{I,A} v_I ⊕ (W_{Q,A} u^{k-1} + b_A))      (k, m)
        p^k = softmax(W_P h_A + b_P),   u^k = Σ_i p^k_i v_i + u^{k-1}
        logits = W_o tanh(W_h u^K + b_h) + b_o   (this model's classifier on u^K)

    The CNN's regions v_I and the LSTM's last states come from the model's shared parts;
    everything after them is written here. -> logits (B, A), p (B, K, m)."""
    regions = model.cnn(image)[0]  # (B, m, d)
    _, (fwd, bwd), _ = model.words(question, q_len)
    logits, weights = [], []
    for b in range(image.shape[0]):
        u = torch.cat([fwd[b], bwd[b]]).double()  # (d,)
        v_i = regions[b].T.double()  # (d, m)
        ps = []
        for s in model.coatt.scores:  # W_{Q,A} = w_query, W_{I,A} = w_keys, b_A, W_P = v
            h_a = torch.tanh(s.w_keys @ v_i + (s.w_query @ u + s.bias)[:, None])  # (k, m)
            e = s.v @ h_a + 0.3  # (m,); b_P = 0.3 moves nothing under the softmax
            p = torch.exp(e - e.max()) / torch.exp(e - e.max()).sum()
            u = v_i @ p + u
            ps.append(p)
        h = torch.tanh(model.hidden.weight @ u + model.hidden.bias)
        logits.append(model.out.weight @ h + model.out.bias)
        weights.append(torch.stack(ps))
    return torch.stack(logits), torch.stack(weights)


@pytest.mark.parametrize("hops", [1, 2])
def test_forward_equals_the_papers_equations(hops):
    torch.manual_seed(hops)
    model = _tiny(hops).double().eval()
    for s in model.coatt.scores:  # b_A starts at zero: give it a value to check
        torch.nn.init.normal_(s.bias)
    image, question, q_len = _inputs()
    out = model(image, question, q_len)
    with torch.no_grad():
        want_logits, want_p = reference_logits(model, image, question, q_len)
    torch.testing.assert_close(out.logits, want_logits, rtol=1e-10, atol=1e-12)
    assert out.stacked is not None and out.stacked.weights.shape == (2, hops, 16)
    torch.testing.assert_close(out.stacked.weights, want_p, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(out.image_weights, want_p[:, -1], rtol=1e-10, atol=1e-12)
    assert out.question_weights is None and out.grid == (4, 4)  # no weights over the words
    torch.testing.assert_close(out.stacked.weights.sum(-1), torch.ones(2, hops).double())
    # padding after the question changes nothing: u⁰ is the LSTM's state at the last real word
    longer = torch.cat([question, torch.zeros(2, 3, dtype=torch.long)], dim=1)
    torch.testing.assert_close(model(image, longer, q_len).logits, out.logits)


def test_gradcheck_float64_on_a_tiny_config():
    """With respect to the image and every parameter of stacked attention and the classifier."""
    torch.manual_seed(0)
    model = _tiny(2).double().eval()
    image, question, q_len = _inputs()
    image = image[:, :, :8, :8].clone().requires_grad_()  # a 2 x 2 patch grid
    heads = ("coatt", "hidden", "out")  # stacked attention and the classifier
    names = [n for n, _ in model.named_parameters() if n.split(".")[0] in heads]
    params = [model.get_parameter(n).detach().clone().requires_grad_() for n in names]

    def f(image, *ps):
        swapped = dict(zip(names, ps, strict=True))
        return torch.func.functional_call(model, swapped, (image, question, q_len)).logits

    assert len(names) == 2 * 4 + 4
    assert torch.autograd.gradcheck(f, (image, *params))


def test_bad_hops_are_one_clear_line():
    with pytest.raises(ValueError, match=r"^DigitQAConfig.hops=0; .* pass hops >= 1"):
        DigitQAConfig(10, 5, coattention="stacked", hops=0)
    with pytest.raises(ValueError, match=r"hops=-1"):
        DigitQAConfig(10, 5, coattention="stacked", hops=-1)
    with pytest.raises(ValueError, match=r"hops=3 counts the hops of coattention='stacked'"):
        DigitQAConfig(10, 5, coattention="parallel", hops=3)
    assert DigitQAConfig(10, 5, coattention="stacked", hops=1).hops == 1


def test_it_trains_below_the_answer_prior_on_a_tiny_batch():
    """Forty Adam updates on 24 questions take the loss below half the entropy of the
    batch's answers, the best a model that ignores image and question can do."""
    torch.manual_seed(0)
    data = load_task("digit-qa", seed=0, train_size=24, valid_size=1, test_size=1).train
    src = Vocab.build(e.question for e in data)
    tgt = Vocab.build((e.answer,) for e in data)
    b = make_batch(data, list(range(len(data))), src, tgt)
    cfg = DigitQAConfig(len(src), len(tgt), dim=16, hidden=16, channels=8, coattention="stacked")
    model = build_model("digit-qa", cfg)
    counts = torch.bincount(b.answer).double()
    prior = float(-(counts / counts.sum() * (counts / counts.sum()).clamp_min(1e-12).log()).sum())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(40):
        loss = F.cross_entropy(model(b.image, b.question, b.q_len).logits, b.answer)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(s.w_keys.grad.abs().sum() > 0 for s in model.coatt.scores)  # every hop learns
    assert losses[-1] < 0.5 * prior < losses[0], (prior, losses[::8])


def test_view_draws_every_hop_and_says_there_are_no_word_weights(tmp_path, capsys):
    """`attnkit view` on a trained stacked model (hops=3 through `--opt`, kept in the
    checkpoint): one canvas per hop, each hop's patch weights summing to one, no word bars."""
    import attnkit
    from attnkit.cli import main
    from attnkit.train.config import DataConfig, FitConfig, ModelConfig, TrainConfig

    attnkit.fit(
        FitConfig(
            data=DataConfig(task="digit-qa", train_size=32, valid_size=8, test_size=8),
            model=ModelConfig(
                "digit-qa", preset="tiny", options={"coattention": "stacked", "hops": 3}
            ),  # fmt: skip
            train=TrainConfig(epochs=1, batch_size=16, lr=3e-3, patience=0, progress=False),
            out=tmp_path / "run",
        ),
        log=lambda s: None,
    )
    page, png = tmp_path / "qa.html", tmp_path / "qa.png"
    argv = ["view", "--checkpoint", str(tmp_path / "run"), "--example", "1",
            "--out", str(page), "--png", str(png)]  # fmt: skip
    assert main(argv) == 0
    assert "question weights: none (the question is read as one vector)" in capsys.readouterr().out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = page.read_text()
    assert all(f"hop {k} over the image patches" in text for k in (1, 2, 3))
    assert "hop 4" not in text and "no weights over the words" in text


def test_the_maps_hold_every_hop():
    from attnkit.tasks.qa import coattention_maps

    data = load_task("digit-qa", seed=0, train_size=8, valid_size=1, test_size=1).train
    src = Vocab.build(e.question for e in data)
    tgt = Vocab.build((e.answer,) for e in data)
    cfg = DigitQAConfig(len(src), len(tgt), dim=16, hidden=16, channels=8, coattention="stacked")
    maps = coattention_maps(build_model("digit-qa", cfg), data[0], src, tgt)
    assert maps.question_weights is None and maps.hop_weights.shape == (2, 6, 6)
    assert abs(maps.hop_weights.sum(axis=(1, 2)) - 1).max() < 1e-6
    assert (maps.image_weights == maps.hop_weights[-1]).all()
    assert not (maps.hop_weights[0] == maps.hop_weights[1]).all()  # each hop its own weights
