"""The core both training loops share (train/updates.py): ``update`` is the manual step
(zero, backward, clip, step), ``run_updates`` stops on the first reason ``after`` gives, and
both loops (loop.train for task families, classify.fit_classifier) run on it."""

from __future__ import annotations

import torch
from torch import nn

from attnkit.train import classify, loop, updates


def _model(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Linear(4, 3)


def _loss(model: nn.Module) -> torch.Tensor:
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(1))
    return 100.0 * model(x).pow(2).mean()  # a large gradient: clipping acts


def test_update_is_the_manual_step_with_clipping() -> None:
    for clip in (0.0, 0.5):
        a, b = _model(0), _model(0)
        opt_a = torch.optim.Adam(a.parameters(), lr=0.1)
        opt_b = torch.optim.Adam(b.parameters(), lr=0.1)
        for _ in range(3):
            updates.update(a, opt_a, _loss(a), clip)
            opt_b.zero_grad(set_to_none=True)
            _loss(b).backward()
            if clip:
                norm = torch.cat([p.grad.flatten() for p in b.parameters()]).norm()
                for p in b.parameters():
                    p.grad.mul_(min(1.0, clip / (float(norm) + 1e-6)))
            opt_b.step()
        for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
            torch.testing.assert_close(pa, pb)


def test_run_updates_stops_on_the_first_reason() -> None:
    seen: list[tuple[str, int]] = []

    def after(i: int, loss: float, batch: int) -> str | None:
        seen.append(("after", i))
        return "enough" if loss >= 30 else None

    def update_on(i: int, batch: int) -> float:
        seen.append(("update", i))
        return float(batch)

    reason = updates.run_updates(2, 9, lambda i: 10 * i, update_on, after)
    assert reason == "enough" and seen[-1] == ("after", 3)
    assert [s for s in seen if s[0] == "update"] == [("update", 2), ("update", 3)]
    assert updates.run_updates(0, 3, lambda i: i, update_on, lambda i, v, b: None) is None


def test_both_training_loops_run_on_the_shared_core(monkeypatch, tmp_path) -> None:
    calls: list[str] = []

    def spy(module: object, name: str) -> None:
        real = getattr(module, name)

        def wrapped(*args, **kwargs):
            calls.append(f"{module.__name__.rsplit('.', 1)[-1]}.{name}")
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapped)

    for module in (loop, classify):
        spy(module, "run_updates")
        spy(module, "update")
    classify.fit_classifier(_model(0), lambda s: (torch.randn(8, 4), torch.zeros(8).long()),
                            steps=2, lr=1e-2, seed=0)  # fmt: skip
    import attnkit
    from attnkit.train.config import DataConfig, FitConfig, ModelConfig, TrainConfig

    attnkit.fit(FitConfig(DataConfig(task="copy", train_size=16, valid_size=4, test_size=4),
                          ModelConfig("rnnsearch", "small", {"emb": 8, "enc_hidden": 8,
                                                             "dec_hidden": 8, "attn_hidden": 8}),
                          TrainConfig(epochs=1, batch_size=8, progress=False),
                          out=tmp_path / "run"), log=lambda s: None)  # fmt: skip
    assert calls.count("classify.run_updates") == 1 and calls.count("classify.update") == 2
    assert calls.count("loop.run_updates") == 1 and calls.count("loop.update") == 2
