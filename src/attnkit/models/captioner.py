"""An image captioner with attention over patches (Xu et al. 2015, "Show, Attend and Tell").

A small CNN turns the image into a grid of L patch features a_i (the paper's conv5 grid of a
VGG net, here two 3×3 convolutions and a max-pool of ``patch`` × ``patch`` pixels, plus
learned row and column embeddings so that a feature knows where it is); an LSTM decoder
attends over them at every step:

    a_i = W_f maxpool(CNN(x))_i + P_row(r_i) + P_col(c_i)            patch features (B, L, D)
    h_0 = tanh(f_h(mean_i a_i)),  c_0 = tanh(f_c(mean_i a_i))        (Xu 2015, §3.1.2)
    e_ti = vᵀ tanh(W h_{t-1} + U a_i),  α_t = softmax(e_t)           (eq. 4-5; AdditiveScore)
    ẑ_t = β_t φ({a_i}, α_t),  β_t = σ(f_β(h_{t-1}))                  (eq. 6, §4.2.1 gate)
    h_t, c_t = LSTM([E y_{t-1}; ẑ_t], (h_{t-1}, c_{t-1}))            (eq. 1-3)
    p(y_t) ∝ exp(L_o(E y_{t-1} + L_h h_t + L_z ẑ_t))                 (eq. 7, deep output)

φ and the normaliser are chosen by ``softness`` (caption_softness.py): soft, mean, hard
(REINFORCE), gumbel. The training loss (Xu 2015, eq. 12 and 14), per target token:

    soft/mean/gumbel   −log p(y | x) + λ Σ_i (1 − Σ_t α_ti)²
    hard               the same for the sampled locations z̃, plus the REINFORCE surrogate
                       −(R − b) Σ_t log p(z̃_t) − λ_e Σ_t H(α_t) (Xu 2015, eq. 12), b a moving
                       average of R (``baseline`` buffer); with probability ``hard_mix`` the
                       expected (soft) context is used instead of a sample (§4.1: 0.5)

Hard attention's recipe, each piece an option (library default first, Xu's second):

    reward        "sum": R = log p(y | z̃, x) = Σ_t log p(y_t) | "mean": R = the per-token mean
                  (Xu's code, arctic-captions capgen.py: masked_cost.mean(0), with minibatches of
                  one caption length); in "mean" mode the surrogate is summed over the captions
                  of the minibatch, not averaged (Xu's known_grads are per caption, the NLL is
                  the minibatch mean)
    reward_scale  R multiplied by it: 1.0 | 0.1 (Xu's code: "/10.")
    mix_per       "image": hard_mix drawn per image | "batch": per minibatch (Xu's code: one
                  h_sampling_mask for the whole minibatch; the entropy term then applies on
                  every minibatch, as in his code)
    baseline_on   "all": b fed every caption's R | "sampled": only the sampled captions' (§4.1,
                  b tracks log p(y | s̃, a); a minibatch with none leaves b as it was)
    entropy_weight  0.01 | 0.002 (Xu's code: alpha_entropy_c)
    gate          the β gate: True | Xu puts it in §4.2.1, deterministic (soft) attention
    features, freeze_cnn   CNN weights loaded from a file, and the CNN frozen (Xu: fixed
                  features of a pretrained VGG net; models/caption_features.py trains one)
    variational        −ELBO_t = −E_q[log p(y_t | a_z)] + KL(q(z_t | x, y) ‖ α_t) (Deng et al.
                       2018), enumerated over the patches; the LSTM reads the soft context, the
                       output layer one patch; at test the exact marginal Σ_z α_tz p(y_t | a_z)

Legend: B batch, H/W image height/width, L = (H/patch)·(W/patch) patches, D feature width,
T caption steps, V target vocabulary, n decoder width.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._checks import check_ranges
from ..core import attend
from ..mechanisms.hard import MovingAverageBaseline, reinforce_loss
from ..mechanisms.variational import enumerated_elbo, log_normalise
from ..stages.scores import AdditiveScore
from .caption_features import cnn
from .caption_softness import (
    SOFTNESS,
    caption_reward,
    check_softness,
    doubly_stochastic_penalty,
    expected_context,
)
from .latent import InferenceNetwork
from .registry import MODELS, ModelEntry
from .softness import Softness, resolve, tau_at


@dataclass
class CaptionerConfig:
    """The captioner's sizes and its attention's softness (see the module docstring)."""

    src_vocab: int  # unused (the source is pixels); the checkpoint records it
    tgt_vocab: int
    channels: int = 32  # CNN width
    patch: int = 4  # pixels per side of one patch: 1, 2, 4 or 8
    feat: int = 64  # D, patch feature width
    emb: int = 32
    dec_hidden: int = 128  # n
    attn_hidden: int = 64
    dropout: float = 0.0
    softness: str = "soft"  # soft | mean | hard | gumbel | variational
    doubly_stochastic: float = 0.0  # λ of Σ_i (1 − Σ_t α_ti)²
    gate: bool = True  # the β gate of Xu 2015 §4.2.1
    entropy_weight: float = 0.01  # λ_e, hard attention's entropy bonus
    baseline_decay: float = 0.9  # the moving-average baseline's decay
    tau_start: float = 1.0  # Gumbel temperature at the first update ...
    tau_end: float = 0.5  # ... and from tau_steps updates on
    tau_steps: int = 2000
    at_test: str = "argmax"  # hard/gumbel at test: argmax | expectation
    hard_mix: float = 0.5  # hard: the chance that an image reads the expected context instead
    max_len: int = 12  # greedy decoding stops here
    max_grid: int = 32  # the most patch rows (and columns) an image may have
    q_hidden: int = 32  # variational: the inference network's GRU width
    reward: str = "sum"  # hard: sum | mean (per token, Xu's code)
    reward_scale: float = 1.0  # hard: R times this (Xu's code: 0.1)
    mix_per: str = "image"  # hard: hard_mix drawn per image | batch (Xu's code)
    baseline_on: str = "all"  # hard: b fed all captions' R | sampled (Xu 2015 §4.1)
    cnn_layers: int = 2  # 2 | 3 (a max-pool and a third conv: a feature sees 12x12 pixels)
    features: str = ""  # a file of CNN weights (encoder.cnn's state_dict) loaded at build
    freeze_cnn: bool = False  # the CNN gets no gradient (Xu: fixed pretrained features)

    def __post_init__(self) -> None:
        check_ranges(
            self,
            positive=(
                "src_vocab",
                "tgt_vocab",
                "channels",
                "feat",
                "emb",
                "dec_hidden",
                "attn_hidden",
                "tau_steps",
                "max_len",
                "max_grid",
                "q_hidden",
            ),
        )
        if self.patch not in (1, 2, 4, 8):
            raise ValueError(f"CaptionerConfig.patch={self.patch}; choose 1, 2, 4 or 8 pixels")
        if self.cnn_layers not in (2, 3) or (self.cnn_layers == 3 and self.patch < 2):
            raise ValueError(f"CaptionerConfig.cnn_layers={self.cnn_layers}; choose 2, or 3 "
                             "with patch >= 2")  # fmt: skip
        check_softness(self)

    @property
    def resolved_softness(self) -> Softness:
        """The object of ``softness`` (models/softness.py), which the model asks what to do."""
        return resolve(self.softness, SOFTNESS, type(self).__name__)


PRESETS: dict[str, dict[str, Any]] = {
    "tiny": dict(channels=8, feat=16, emb=8, dec_hidden=24, attn_hidden=16),
    "small": {},
    "base": dict(channels=64, feat=128, emb=64, dec_hidden=256, attn_hidden=128),
}


@dataclass
class Patches:
    """The encoded image: features a (B, L, D), mask (B, L) True = a patch inside the image,
    grid (rows, cols) of patches (L = rows · cols, row-major)."""

    features: Tensor
    mask: Tensor
    grid: tuple[int, int]


@dataclass
class CaptionOutput:
    logits: Tensor  # (B, T, V)
    weights: Tensor  # (B, T, L) attention α over patches
    log_prob: Tensor | None = None  # (B, T) log α of the sampled patch (hard, training)
    entropy: Tensor | None = None  # (B, T) H(α_t) (hard, training)
    readouts: Tensor | None = None  # (B, T, L, V) log p(y_t | a_z) for every z (variational)
    patches: Patches | None = None


class PatchEncoder(nn.Module):
    """The CNN (``caption_features.cnn``: by default two 3x3 convolutions and a max-pool of
    patch x patch pixels), a projection to D and row and column embeddings: image
    (B, 1, H, W), pixels (B, H, W) bool -> Patches."""

    def __init__(self, c: CaptionerConfig) -> None:
        super().__init__()
        self.cnn = cnn(c.channels, c.patch, c.cnn_layers)  # caption_features.py
        self.proj = nn.Linear(c.channels, c.feat)  # W_f
        self.rows = nn.Embedding(c.max_grid, c.feat)  # P_row
        self.cols = nn.Embedding(c.max_grid, c.feat)  # P_col
        self.patch, self.max_grid = c.patch, c.max_grid
        if c.features and not self.proj.weight.is_meta:  # a meta copy checks shapes only
            try:
                state = torch.load(c.features, map_location="cpu", weights_only=True)
            except FileNotFoundError as e:
                raise FileNotFoundError(
                    f"CaptionerConfig.features={c.features!r}: no such file; train the CNN "
                    "(attnkit.models.caption_features.pretrain_cnn) or set features=''"
                ) from e
            self.cnn.load_state_dict(state)
        if c.freeze_cnn:
            self.cnn.requires_grad_(False)

    def forward(self, image: Tensor, pixels: Tensor) -> Patches:
        p = self.patch
        if image.shape[-2] % p or image.shape[-1] % p:
            raise ValueError(
                f"an image of {tuple(image.shape[-2:])} pixels is not a grid of {p}x{p} patches"
            )
        frozen = not any(p.requires_grad for p in self.cnn.parameters())
        with torch.set_grad_enabled(torch.is_grad_enabled() and not frozen):
            grid = self.cnn(image)  # (B, C, H/p, W/p)
        r, c = grid.shape[-2:]
        if max(r, c) > self.max_grid:
            raise ValueError(
                f"{r}x{c} patches; the model has positions for {self.max_grid}: raise max_grid"
            )
        a = self.proj(grid.flatten(2).transpose(1, 2))  # (B, L, D)
        pos = self.rows.weight[:r, None] + self.cols.weight[None, :c]  # (r, c, D)
        a = a + pos.reshape(r * c, -1)  # (B, L, D)
        mask = pixels[:, ::p, ::p].reshape(pixels.shape[0], r * c)  # (B, L)
        return Patches(a, mask, (r, c))


class Captioner(nn.Module):
    """Show, Attend and Tell (Xu 2015): PatchEncoder, then an LSTM that attends over the
    patches at every step. forward(image, pixels, tgt_in) -> CaptionOutput (teacher forcing);
    training_loss(batch) -> (loss, output); greedy(image, pixels) -> (ids, weights, grid)."""

    family = "caption"
    name = "captioner"

    def __init__(self, config: CaptionerConfig) -> None:
        super().__init__()
        self.config = c = config
        self.encoder = PatchEncoder(c)
        self.init_h = nn.Linear(c.feat, c.dec_hidden)  # f_init,h
        self.init_c = nn.Linear(c.feat, c.dec_hidden)  # f_init,c
        self.score = AdditiveScore(c.dec_hidden, c.feat, c.attn_hidden)
        self.beta = nn.Linear(c.dec_hidden, 1)  # f_β
        self.tgt_emb = nn.Embedding(c.tgt_vocab, c.emb, padding_idx=0)
        self.cell = nn.LSTMCell(c.emb + c.feat, c.dec_hidden)
        self.out_h = nn.Linear(c.dec_hidden, c.emb)  # L_h
        self.out_z = nn.Linear(c.feat, c.emb)  # L_z
        self.out = nn.Linear(c.emb, c.tgt_vocab)  # L_o
        self.drop = nn.Dropout(c.dropout)
        # q(z_t | x, y), the variational posterior over patches (Deng 2018, §4)
        self.inference = (
            InferenceNetwork(c.tgt_vocab, c.emb, c.q_hidden, c.feat)
            if c.resolved_softness.posterior
            else None
        )
        self.register_buffer("updates", torch.zeros((), dtype=torch.long))  # τ schedule
        self.register_buffer("baseline", torch.full((), float("nan")))  # b; NaN = unset

    # -------------------------------------------------------------------------- one step
    def start(self, patches: Patches) -> tuple[Tensor, Tensor]:
        """(h_0, c_0) from the mean of the allowed patches, (B, n) each."""
        m = patches.mask[..., None].to(patches.features)  # (B, L, 1)
        mean = (patches.features * m).sum(1) / m.sum(1).clamp_min(1)  # (B, D)
        return torch.tanh(self.init_h(mean)), torch.tanh(self.init_c(mean))

    def tau(self) -> float:
        """The Gumbel temperature after the updates counted so far."""
        return tau_at(self.config, int(cast(Tensor, self.updates)))

    def step(
        self,
        prev: Tensor,
        state: tuple[Tensor, Tensor],
        patches: Patches,
        projected: Tensor,
        expected: Tensor | None = None,
    ) -> tuple[Tensor, tuple[Tensor, Tensor], Any]:
        """prev (B,) ids, state (h, c) (B, n) each, projected U a (B, L, A)
        -> logits (B, V), the next state, and the attention result (weights (B, 1, L)).
        ``expected`` (B,) bool: hard attention in training reads the expected context of
        these captions instead of a sample."""
        c = self.config
        soft = c.resolved_softness
        h, cell = state
        tau = self.tau() if soft.tempered else 1.0  # reads the update count back
        normaliser, reduce = soft.caption_stages(self.training, c.at_test, tau, expected)
        att = attend(
            h[:, None],  # (B, 1, n)
            projected,  # (B, L, A)
            patches.features,  # (B, L, D)
            score=self.score.on_projected_keys,
            normaliser=normaliser,
            reduce=reduce,
            mask=patches.mask[:, None],  # (B, 1, L)
        )
        beta = torch.sigmoid(self.beta(h)) if c.gate else torch.ones_like(h[:, :1])  # (B, 1)
        z = beta * att.context[:, 0].to(h.dtype)  # (B, D) β_t ẑ_t
        y = self.drop(self.tgt_emb(prev))  # (B, E)
        h, cell = self.cell(torch.cat([y, z], -1), (h, cell))  # (B, n)
        logits = self.out(self.drop(y + self.out_h(h) + self.out_z(z)))  # (B, V)
        if soft.marginal:  # the output reads one patch a_z, z ~ α_t: Σ_z α p(y | a_z)
            values = beta[:, None] * patches.features  # (B, L, D)
            readouts = self.out(self.drop((y + self.out_h(h))[:, None] + self.out_z(values)))
            logp = torch.log_softmax(readouts.float(), -1)  # (B, L, V) log p(y_t | a_z)
            assert att.weights is not None
            prior = log_normalise(att.weights[:, 0], patches.mask)  # (B, L) log α_t
            prior = prior.masked_fill(~patches.mask, -torch.inf)
            logits = torch.logsumexp(prior[..., None] + logp, 1)  # (B, V) log Σ_z α p(y | a_z)
            att.extras["readouts"] = logp
        return logits, (h, cell), att

    # -------------------------------------------------------------------------- sequences
    def forward(
        self, image: Tensor, pixels: Tensor, tgt_in: Tensor, expected: Tensor | None = None
    ) -> CaptionOutput:
        """Teacher forcing: image (B, 1, H, W), pixels (B, H, W), tgt_in (B, T) -> output;
        ``expected`` (B,) bool as in ``step``."""
        patches = self.encoder(image, pixels)
        projected = self.score.project_keys(patches.features)  # (B, L, A)
        state = self.start(patches)
        logits, weights, log_probs, entropies, readouts = [], [], [], [], []
        for t in range(tgt_in.shape[1]):
            step_logits, state, att = self.step(tgt_in[:, t], state, patches, projected, expected)
            logits.append(step_logits)
            assert att.weights is not None
            weights.append(att.weights[:, 0])  # (B, L)
            if "log_prob" in att.extras and self.training:
                log_probs.append(att.extras["log_prob"][:, 0])  # (B,)
                entropies.append(att.extras["entropy"][:, 0])  # (B,)
            if "readouts" in att.extras:
                readouts.append(att.extras["readouts"])  # (B, L, V)
        return CaptionOutput(
            torch.stack(logits, 1),  # (B, T, V)
            torch.stack(weights, 1),  # (B, T, L)
            torch.stack(log_probs, 1) if log_probs else None,  # (B, T)
            torch.stack(entropies, 1) if entropies else None,
            torch.stack(readouts, 1) if readouts else None,  # (B, T, L, V)
            patches,
        )

    def training_loss(self, b: Any, label_smoothing: float = 0.0) -> tuple[Tensor, CaptionOutput]:
        """The token-mean training loss of the module docstring for batch ``b`` (a
        CaptionBatch); in training mode it counts the update (τ and b read the count)."""
        c = self.config
        expected = None
        if c.resolved_softness.reinforce and self.training:  # Xu 2015 §4.1, p = hard_mix
            expected = expected_context(b.image.shape[0], c.hard_mix, c.mix_per, b.image.device)
        out = self(b.image, b.pixels, b.tgt_in, expected)
        real = b.tgt_out != 0  # (B, T)
        n_tokens = real.sum().clamp_min(1)
        if self.training:
            cast(Tensor, self.updates).add_(1)
        if out.readouts is not None:
            loss = -(self._elbo(out, b.tgt_out) * real).sum() / n_tokens
            return self._penalised(loss, out, b, real, n_tokens), out
        nll = F.cross_entropy(out.logits.transpose(1, 2), b.tgt_out, reduction="none")  # (B, T)
        if label_smoothing:
            smoothed = F.cross_entropy(
                out.logits.transpose(1, 2),
                b.tgt_out,
                reduction="none",
                label_smoothing=label_smoothing,
            )
            loss = (smoothed * real).sum() / n_tokens
        else:
            loss = (nll * real).sum() / n_tokens
        loss = self._penalised(loss, out, b, real, n_tokens)
        if out.log_prob is not None and out.entropy is not None:
            sampled = real if expected is None else real & ~expected[:, None]  # (B, T)
            reward = caption_reward(nll.detach(), real, c.reward, c.reward_scale)  # (B,)
            rows = sampled.any(1) if c.baseline_on == "sampled" else torch.ones_like(reward > 0)
            baseline = self._baseline(reward[rows]) if bool(rows.any()) else 0.0
            surrogate = reinforce_loss(
                out.log_prob * sampled,
                reward,
                baseline,
                entropy=out.entropy * (real if c.mix_per == "batch" else sampled),
                entropy_weight=c.entropy_weight,
            )  # the mean over the B captions
            per_caption = real.shape[0] if c.reward == "mean" else 1  # Xu: summed over them
            loss = loss + surrogate * per_caption * real.shape[0] / n_tokens
        return loss, out

    def _penalised(
        self, loss: Tensor, out: CaptionOutput, b: Any, real: Tensor, n_tokens: Tensor
    ) -> Tensor:
        """loss + λ Σ_i (1 − Σ_t α_ti)² per caption, per target token (eq. 14)."""
        c = self.config
        if not c.doubly_stochastic:
            return loss
        patches_mask = b.pixels[:, :: c.patch, :: c.patch].flatten(1)  # (B, L)
        penalty = doubly_stochastic_penalty(out.weights, real, patches_mask)  # (B,)
        return loss + c.doubly_stochastic * penalty.sum() / n_tokens

    def _elbo(self, out: CaptionOutput, tgt_out: Tensor) -> Tensor:
        """The ELBO of every step (B, T), enumerated over the patches (Deng 2018, eq. 3):
        E_q[log p(y_t | a_z)] − KL(q(z_t | x, y) ‖ α_t)."""
        assert out.readouts is not None and out.patches is not None and self.inference
        q_log = self.inference(tgt_out, out.patches.features, out.patches.mask)  # (B, T, L)
        mask = out.patches.mask[:, None, :].expand_as(q_log)  # (B, T, L)
        p_log = log_normalise(out.weights, mask)  # (B, T, L)
        gold = tgt_out[:, :, None, None].expand(*q_log.shape, 1)  # (B, T, L, 1)
        log_lik = out.readouts.gather(-1, gold)[..., 0]  # (B, T, L)
        return enumerated_elbo(q_log, p_log, log_lik, mask).elbo

    def _baseline(self, reward: Tensor) -> float:
        """This batch's baseline b (Xu 2015 §4.1; the batch mean on the first update); the
        moving average is kept in the ``baseline`` buffer, so it follows checkpoints."""
        value = float(cast(Tensor, self.baseline))
        avg = MovingAverageBaseline(self.config.baseline_decay, None if value != value else value)
        used = avg.update(reward)
        if self.training and avg.value is not None:
            cast(Tensor, self.baseline).fill_(avg.value)
        return used

    @torch.no_grad()
    def greedy(
        self, image: Tensor, pixels: Tensor, bos: int = 1, eos: int = 2
    ) -> tuple[list[list[int]], Tensor, tuple[int, int]]:
        """Greedy decoding in eval mode: the ids of each caption (up to eos, excluded), the
        attention of every step (B, T, L) and the patch grid (rows, cols)."""
        was = self.training
        self.eval()
        try:
            patches = self.encoder(image, pixels)
            projected = self.score.project_keys(patches.features)  # (B, L, A)
            state = self.start(patches)
            prev = torch.full((image.shape[0],), bos, dtype=torch.long, device=image.device)
            done = torch.zeros_like(prev, dtype=torch.bool)
            ids, weights = [], []
            for _ in range(self.config.max_len):
                logits, state, att = self.step(prev, state, patches, projected)
                prev = logits.argmax(-1)  # (B,)
                ids.append(prev)
                assert att.weights is not None
                weights.append(att.weights[:, 0])  # (B, L)
                done = done | (prev == eos)
                if bool(done.all()):
                    break
        finally:
            self.train(was)
        table = torch.stack(ids, 1).tolist()  # (B, T)
        captions = [row[: row.index(eos)] if eos in row else row for row in table]
        return captions, torch.stack(weights, 1), patches.grid


MODELS.register(ModelEntry("captioner", Captioner, CaptionerConfig, PRESETS))

__all__ = ["PRESETS", "CaptionOutput", "Captioner", "CaptionerConfig", "PatchEncoder", "Patches"]
