"""Greedy and beam search on an untrained model: consistent with each other and with scores."""

import math

import pytest
import torch

from attnkit.decode import beam_search, greedy
from attnkit.models import build_model
from attnkit.models.base import Seq2Seq


@pytest.fixture(autouse=True, scope="module")
def _one_thread():  # type: ignore[no-untyped-def]
    """Small recurrent models run far faster on one thread when the cores are shared."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def model_and_inputs():  # type: ignore[no-untyped-def]
    torch.manual_seed(1)
    model = build_model("rnnsearch", src_vocab=20, tgt_vocab=12, preset="tiny").eval()
    src = torch.randint(4, 20, (4, 6))
    src_len = torch.tensor([6, 3, 5, 2])
    for i, n in enumerate(src_len.tolist()):
        src[i, n:] = 0
    return model, src, src_len


def test_beam_of_one_is_greedy() -> None:
    model, src, src_len = model_and_inputs()
    g = greedy(model, src, src_len, max_len=8)
    b = beam_search(model, src, src_len, beam=1, length_penalty=0.0, max_len=8)
    assert g.tokens == b.tokens
    for wg, wb in zip(g.weights, b.weights, strict=True):
        assert wg is not None and wb is not None
        torch.testing.assert_close(wg, wb)


def test_beam_finds_at_least_the_greedy_log_probability() -> None:
    model, src, src_len = model_and_inputs()
    g = greedy(model, src, src_len, max_len=8)
    b = beam_search(model, src, src_len, beam=4, length_penalty=0.0, max_len=8)
    for sg, sb in zip(g.scores, b.scores, strict=True):
        assert sb >= sg - 1e-5


def test_weights_cover_the_real_source_only() -> None:
    model, src, src_len = model_and_inputs()
    d = beam_search(model, src, src_len, beam=3, max_len=8)
    for i, w in enumerate(d.weights):
        assert w is not None and w.shape == (min(len(d.tokens[i]) + 1, 8), int(src_len[i]))
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[0]))


class MarkovModel(Seq2Seq):
    """A hand-built decoder: the next token depends on the previous one only, by the table
    ``NEXT`` (the source is ignored). Two complete hypotheses exist:
    "A" (p = 0.6, |y| = 2 with eos) and "B C D E" (p = 0.4, |y| = 5)."""

    A, B, C, D, E = 3, 4, 5, 6, 7
    NEXT = {1: {A: 0.6, B: 0.4}, A: {2: 1.0}, B: {C: 1.0}, C: {D: 1.0}, D: {E: 1.0}, E: {2: 1.0}}

    def __init__(self) -> None:
        super().__init__()
        table = torch.full((8, 8), 1 / 6).log()  # pad / eos rows: never read for a live beam
        table[:, :2] = float("-inf")
        for prev, nxt in self.NEXT.items():
            table[prev] = float("-inf")
            for tok, p in nxt.items():
                table[prev, tok] = torch.tensor(p).log()
        self.register_buffer("table", table)  # (V, V) log p(next | prev)

    def encode(self, src: torch.Tensor, src_len: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"len": src_len}

    def init_state(self, memory: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
        return (memory["len"],)

    def step(self, prev, state, memory):  # type: ignore[no-untyped-def]
        return self.table[prev], None, state  # (B, V)


def best_by_formula(alpha: float) -> tuple[list[int], float]:
    """Every complete hypothesis of MarkovModel enumerated, scored log p(y) / |y|^α (|y|
    counts eos), the best returned: written from the formula, not from beam_search."""
    done: list[tuple[list[int], float]] = []
    stack: list[tuple[list[int], int, float]] = [([], 1, 0.0)]
    while stack:
        seq, prev, logp = stack.pop()
        for tok, p in MarkovModel.NEXT[prev].items():
            if tok == 2:
                done.append((seq, (logp + math.log(p)) / (len(seq) + 1) ** alpha))
            else:
                stack.append(([*seq, tok], tok, logp + math.log(p)))
    return max(done, key=lambda d: d[1])


@pytest.mark.parametrize("alpha", [0.0, 0.5, 0.6, 0.7, 1.0, 2.0])
def test_length_penalty_picks_what_the_formula_says(alpha: float) -> None:
    # "A": log 0.6 / 2^α;  "B C D E": log 0.4 / 5^α. They cross at α = log(log .4 / log .6) /
    # log(5/2) ≈ 0.638: the short one wins below, the long one above.
    m = MarkovModel
    src, src_len = torch.ones(1, 3, dtype=torch.long), torch.tensor([3])
    d = beam_search(MarkovModel(), src, src_len, beam=2, length_penalty=alpha, max_len=10)
    expected = [m.A] if alpha < 0.638 else [m.B, m.C, m.D, m.E]
    tokens, score = best_by_formula(alpha)
    assert tokens == expected
    assert d.tokens == [expected]
    assert d.scores[0] == pytest.approx(score, abs=1e-6)


@pytest.mark.parametrize("name", ["rnnsearch", "transformer"])
def test_a_model_left_training_decodes_in_evaluation_mode(name: str) -> None:
    """Decoding puts a model that was left training (dropout on) into evaluation mode: the
    same hypotheses as the model in eval mode, every time."""
    torch.manual_seed(2)
    model = build_model(name, src_vocab=20, tgt_vocab=12, preset="tiny", dropout=0.5)
    _, src, src_len = model_and_inputs()
    want_g = greedy(model.eval(), src, src_len, max_len=8)
    want_b = beam_search(model, src, src_len, beam=3, max_len=8)
    for _ in range(3):
        assert greedy(model.train(), src, src_len, max_len=8).tokens == want_g.tokens
        assert not model.training
        assert beam_search(model.train(), src, src_len, beam=3, max_len=8).tokens == want_b.tokens
        assert not model.training
