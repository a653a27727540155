"""The plain PyTorch yardsticks of ``attnkit bench --scenarios models`` (bench/plain.py) are
the same networks as attnkit's: PlainBahdanau given RNNsearch's weights gives its logits;
PlainTransformer has the Transformer's parameters (+ nn.Transformer's two final
LayerNorms); the quick scenario runs from the CLI and reports the ratios, RNNsearch both as it
trains (packed targets) and over the padded targets (the plain model's positions)."""

import json
from pathlib import Path

import pytest
import torch
from _spies import packed_calls

from attnkit.bench.models import _plain_twin, versus_speed
from attnkit.bench.plain import PlainBahdanau
from attnkit.cli import main
from attnkit.models import build_model


def _copy_rnnsearch(ours: torch.nn.Module, plain: PlainBahdanau) -> None:
    sd = ours.state_dict()
    with torch.no_grad():
        plain.src_emb.weight.copy_(sd["encoder.embed.weight"])
        for name, value in sd.items():
            if name.startswith("encoder.rnn."):
                getattr(plain.encoder, name.removeprefix("encoder.rnn.")).copy_(value)
        for mine, theirs in (("init", plain.init), ("cell", plain.cell),
                             ("output.pre", plain.pre), ("output.out", plain.out)):  # fmt: skip
            for p in ("weight", "bias", "weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                if f"{mine}.{p}" in sd:
                    getattr(theirs, p).copy_(sd[f"{mine}.{p}"])
        plain.tgt_emb.weight.copy_(sd["tgt_emb.weight"])
        plain.w_a.weight.copy_(sd["attention.score.w_query"])
        plain.u_a.weight.copy_(sd["attention.score.w_keys"])
        plain.u_a.bias.copy_(sd["attention.score.bias"])
        plain.v_a.weight.copy_(sd["attention.score.v"][None])


def test_plain_bahdanau_is_rnnsearch() -> None:
    torch.manual_seed(0)
    ours = build_model("rnnsearch", preset="tiny", src_vocab=11, tgt_vocab=9).double()
    plain = _plain_twin(ours).double()
    assert isinstance(plain, PlainBahdanau)
    assert sum(p.numel() for p in plain.parameters()) == sum(p.numel() for p in ours.parameters())
    _copy_rnnsearch(ours, plain)
    g = torch.Generator().manual_seed(1)
    src_len = torch.tensor([5, 2, 4])
    src = torch.randint(3, 11, (3, 5), generator=g) * (torch.arange(5) < src_len[:, None])
    tgt_in = torch.randint(1, 9, (3, 6), generator=g)
    want = ours(src, src_len, tgt_in).logits  # (B, T, V)
    torch.testing.assert_close(plain(src, src_len, tgt_in), want, rtol=0, atol=1e-10)


def test_plain_transformer_has_the_transformers_sizes() -> None:
    ours = build_model("transformer", preset="tiny", src_vocab=11, tgt_vocab=9)
    plain = _plain_twin(ours)
    n_ours = sum(p.numel() for p in ours.parameters())
    extra = 2 * 2 * ours.config.dim  # nn.Transformer's final encoder and decoder LayerNorms
    assert sum(p.numel() for p in plain.parameters()) == n_ours + extra
    src, tgt = torch.randint(1, 11, (2, 4)), torch.randint(1, 9, (2, 3))
    assert plain(src, torch.tensor([4, 2]), tgt).shape == (2, 3, 9)


def test_models_scenario_runs_from_the_cli(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["bench", "--scenarios", "models", "--quick", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "PlainBahdanau" in printed and "PlainTransformer" in printed
    report = json.loads((tmp_path / "bench_models.json").read_text())["models"]
    for row in report["rows"]:
        assert row["ratio"] == row["rounds"][0]["plain"] / row["rounds"][0]["attnkit"]
    assert [r["model"] for r in report["rows"]] == ["rnnsearch", "rnnsearch-padded", "transformer"]


@pytest.mark.parametrize("row, packs", [("rnnsearch", True), ("rnnsearch-padded", False)])
def test_the_padded_row_times_rnnsearch_over_the_padded_targets(
    row: str, packs: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = packed_calls(monkeypatch)
    versus_speed((row,), preset="tiny", steps=1, warmup=1, repeats=1, batch_size=8, log=str)
    assert bool(calls) == packs
    with pytest.raises(ValueError, match="choose from"):
        versus_speed(("rnnsearch-packed",), preset="tiny", repeats=1)
