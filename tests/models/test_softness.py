"""The softness of RNNsearch's and Luong's attention (models/latent.py): each trains, hard and
gumbel decode by the argmax, variational's test-time output is the exact marginal, and the
setting survives a checkpoint."""

import argparse

import pytest
import torch
import torch.nn.functional as F

from attnkit.cli.train import add_data_args, add_model_args, add_train_args, fit_config
from attnkit.data.vocab import Vocab
from attnkit.models import build_model
from attnkit.models.latent import tau_at, token_scores
from attnkit.train import checkpoint

MODES = [
    ("soft", "enumerate", "average"),
    ("mean", "enumerate", "average"),
    ("hard", "enumerate", "average"),
    ("hard", "enumerate", "soft"),
    ("gumbel", "enumerate", "average"),
    ("variational", "enumerate", "average"),
    ("variational", "sample", "average"),
    ("variational", "sample", "soft"),
]


def batch(seed: int = 0):
    """A tiny copy-like task: B=6 sources, the target is the source (so attention helps)."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, 12, (6, 5), generator=g)
    src_len = torch.tensor([5, 5, 4, 3, 5, 2])
    for i, n in enumerate(src_len):
        src[i, n:] = 0
    ones, zeros = torch.ones(6, 1, dtype=torch.long), torch.zeros(6, 1, dtype=torch.long)
    tgt = torch.cat([ones, src, zeros], 1)  # bos, source, then eos / padding
    for i, n in enumerate(src_len):
        tgt[i, n + 1] = 2  # eos
    return src, src_len, tgt[:, :-1], tgt[:, 1:]


def model(name: str, softness: str, estimator: str = "enumerate", **kw):
    torch.manual_seed(0)
    return build_model(
        name, preset="tiny", src_vocab=12, tgt_vocab=12, softness=softness, estimator=estimator,
        **kw,
    )  # fmt: skip


def nll(m, b) -> float:
    ll, _ = token_scores(m, *b)
    return float(-ll[b[3] != 0].mean())


@pytest.mark.parametrize("name", ["rnnsearch", "luong"])
@pytest.mark.parametrize("softness,estimator,baseline", MODES)
def test_each_softness_trains(name: str, softness: str, estimator: str, baseline: str) -> None:
    m, b = model(name, softness, estimator, reward_baseline=baseline), batch()
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    before = nll(m, b)
    m.train()
    for _ in range(20):
        loss, out = m.training_loss(*b)
        assert out.logits.shape == (6, 6, 12) and torch.isfinite(loss)
        opt.zero_grad()
        loss.backward()
        opt.step()
    after = nll(m, b)
    assert after < 0.7 * before, (before, after)
    if softness in ("hard", "gumbel", "variational"):
        assert int(m.updates) == 20  # its own count of training updates


def test_soft_training_loss_is_plain_cross_entropy() -> None:
    m, (src, src_len, tgt_in, tgt_out) = model("rnnsearch", "soft"), batch()
    m.eval()
    loss, _ = m.training_loss(src, src_len, tgt_in, tgt_out, 0.1)
    logits = m(src, src_len, tgt_in).logits
    want = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=0,
                           label_smoothing=0.1)  # fmt: skip
    torch.testing.assert_close(loss, want)


@pytest.mark.parametrize("name", ["rnnsearch", "luong"])
@pytest.mark.parametrize("softness", ["hard", "gumbel"])
def test_hard_and_gumbel_take_the_argmax_at_test(name: str, softness: str) -> None:
    m, (src, src_len, tgt_in, _) = model(name, softness), batch()
    m.eval()
    torch.manual_seed(1)
    a = m(src, src_len, tgt_in).logits
    torch.manual_seed(2)
    b = m(src, src_len, tgt_in).logits
    assert torch.equal(a, b)  # deterministic
    memory = m.encode(src, src_len)
    parts = m.parts(tgt_in[:, 0], m.init_state(memory), memory)
    z = parts.alpha.argmax(-1)  # (B,)
    want = parts.readout(parts.values[torch.arange(6), z])
    torch.testing.assert_close(a[:, 0], want)
    m.train()  # training samples: two draws differ somewhere
    torch.manual_seed(1)
    c = m(src, src_len, tgt_in).logits
    torch.manual_seed(2)
    assert not torch.equal(c, m(src, src_len, tgt_in).logits)


def test_mean_pooling_weights_are_uniform() -> None:
    m, (src, src_len, tgt_in, _) = model("luong", "mean"), batch()
    w = m(src, src_len, tgt_in).weights  # (B, T, S)
    for i, n in enumerate(src_len.tolist()):
        torch.testing.assert_close(w[i, :, :n], torch.full_like(w[i, :, :n], 1 / n))
        assert float(w[i, :, n:].abs().sum()) == 0


@pytest.mark.parametrize("name", ["rnnsearch", "luong"])
def test_variational_test_output_is_the_exact_marginal_and_the_elbo_bounds_it(name) -> None:
    m, (src, src_len, tgt_in, tgt_out) = model(name, "variational"), batch()
    m.eval()
    logits = m(src, src_len, tgt_in).logits  # log Σ_z p(z) p(y | z) over the vocabulary
    torch.testing.assert_close(logits.exp().sum(-1), torch.ones(6, 6))
    ll, elbo = token_scores(m, src, src_len, tgt_in, tgt_out)
    gold = logits.gather(-1, tgt_out[..., None])[..., 0]
    real = tgt_out != 0
    torch.testing.assert_close(ll[real], gold[real])
    assert elbo is not None and bool((elbo[real] <= ll[real] + 1e-5).all())
    # by hand for one sentence, one step: Σ_s α_s softmax(readout(h_s))[y]
    memory = m.encode(src, src_len)
    parts = m.parts(tgt_in[:, 0], m.init_state(memory), memory)
    probs = torch.softmax(parts.readout(parts.values), -1)  # (B, S, V)
    alpha = parts.alpha / parts.alpha.sum(-1, keepdim=True)
    by_hand = (alpha[..., None] * probs).sum(1)  # (B, V)
    torch.testing.assert_close(logits[:, 0].exp(), by_hand)


def test_gumbel_temperature_schedule() -> None:
    cfg = model("rnnsearch", "gumbel", tau_start=2.0, tau_end=0.5, tau_steps=10).config
    assert tau_at(cfg, 0) == pytest.approx(2.0)
    assert tau_at(cfg, 5) == pytest.approx(1.0)  # geometric mean half way
    assert tau_at(cfg, 10) == tau_at(cfg, 99) == pytest.approx(0.5)


@pytest.mark.parametrize(
    "bad",
    [
        dict(softness="sharp"),
        dict(estimator="guess"),
        dict(tau_start=0.0),
        dict(tau_end=-1.0),
        dict(tau_steps=0),
        dict(entropy_weight=-0.1),
        dict(baseline_decay=1.0),
        dict(reward_baseline="learned"),
    ],
)
def test_bad_softness_settings_fail_clearly(bad) -> None:
    for name in ("rnnsearch", "luong"):
        with pytest.raises(ValueError, match=next(iter(bad))):
            build_model(name, src_vocab=5, tgt_vocab=5, **bad)


def test_softness_round_trips_through_a_checkpoint(tmp_path) -> None:
    m, b = model("luong", "variational", "sample", tau_start=3.0), batch()
    m.train()
    m.training_loss(*b)[0].backward()  # one counted update, a baseline
    vocab = Vocab.build([[str(i) for i in range(8)]])
    checkpoint.save(tmp_path / "ck", m, "luong", vocab, vocab)
    ck = checkpoint.load(tmp_path / "ck")
    cfg = ck.model.config
    assert (cfg.softness, cfg.estimator, cfg.tau_start) == ("variational", "sample", 3.0)
    assert int(ck.model.updates) == 1 and float(ck.model.baseline) == float(m.baseline)
    m.eval()
    torch.testing.assert_close(ck.model(*b[:3]).logits, m(*b[:3]).logits)


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_data_args(p)
    add_model_args(p)
    add_train_args(p)
    p.add_argument("--min-freq", type=int, default=1)
    p.add_argument("--out", default="x")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--overwrite", action="store_true")
    return p.parse_args(argv)


def test_cli_flags_reach_the_model_config() -> None:
    args = parse(["--task", "toy-ko", "--model", "luong", "--softness", "gumbel",
                  "--tau-start", "2", "--tau-end", "0.3", "--tau-steps", "50"])  # fmt: skip
    options = fit_config(args).model.options
    assert options == {"softness": "gumbel", "tau_start": 2.0, "tau_end": 0.3, "tau_steps": 50}
    with pytest.raises(ValueError, match="--softness"):
        fit_config(parse(["--task", "toy-ko", "--model", "transformer", "--softness", "hard"]))


def test_cli_trains_and_the_checkpoint_keeps_the_softness(tmp_path, capsys) -> None:
    from attnkit.cli import main

    argv = ["train", "--task", "toy-ko", "--train-size", "16", "--valid-size", "4",
            "--test-size", "4", "--model", "rnnsearch", "--preset", "tiny",
            "--softness", "hard", "--epochs", "1", "--batch-size", "8", "--no-progress",
            "--out", str(tmp_path / "run")]  # fmt: skip
    assert main(argv) == 0
    ck = checkpoint.load(tmp_path / "run" / "last")
    assert ck.model.config.softness == "hard" and int(ck.model.updates) == 2
    capsys.readouterr()
    assert main(["evaluate", "--checkpoint", str(tmp_path / "run"), "--limit", "2"]) == 0
    assert "hard attention: the output reads argmax of the attention" in capsys.readouterr().out
