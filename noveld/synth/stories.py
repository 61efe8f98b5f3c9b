"""The stories: each story's word distribution (sampled in batches) and which story each
document belongs to (births, then Chinese-restaurant counts plus recency)."""

from __future__ import annotations

import numpy as np

from noveld.synth.config import SynthConfig
from noveld.synth.seeded import FloatArray, IntArray, Uniforms

_ATOMS = 256  # stick-breaking atoms per story for its take on the background
_MAX_BLOCK = 256  # documents seated with one refresh of the story weights, at most


class Stories:
    """Word distributions of all stories as flat, offset cumulative tables for batch sampling.

    Row k of a table holds story k's cumulative probabilities plus k, so one ``searchsorted``
    of ``k + u`` samples from the right story for a whole array of tokens at once.
    """

    def __init__(self, cfg: SynthConfig, rng: np.random.Generator) -> None:
        v, k_n, s = cfg.vocab_size, cfg.n_stories, cfg.story_words
        ranks = np.arange(1, v + 1, dtype=np.float64)
        p_bg = 1.0 / ranks
        self.bg_cum: FloatArray = np.cumsum(p_bg / p_bg.sum())
        self.bg_cum[-1] = 1.0
        c = cfg.topic_concentration * v
        c_bg, c_sp = c * (1.0 - cfg.specific_mass), c * cfg.specific_mass
        self.w_bg: FloatArray = rng.beta(c_bg, c_sp, size=k_n)
        # Specific part: θ_k ~ Dir(c_sp/S) on S words outside the top 2% of ranks.
        skip = v // 50
        self.sp_words: IntArray = np.stack(
            [rng.choice(v - skip, size=s, replace=False) + skip for _ in range(k_n)]
        ).astype(np.int64)
        theta = rng.gamma(c_sp / s, size=(k_n, s)) + 1e-300
        self.sp_flat = self._offset_cum(theta / theta.sum(axis=1, keepdims=True))
        # Background part: stick-breaking atoms from p_bg, leftover mass on p_bg itself (-1).
        sticks = rng.beta(1.0, c_bg, size=(k_n, _ATOMS))
        left = np.cumprod(1.0 - sticks, axis=1)
        pi = sticks * np.concatenate([np.ones((k_n, 1)), left[:, :-1]], axis=1)
        atoms = self._draw_bg(rng.random((k_n, _ATOMS)))
        self.bg_words: IntArray = np.concatenate(
            [atoms, np.full((k_n, 1), -1, dtype=np.int64)], axis=1
        )
        self.bg_flat = self._offset_cum(np.concatenate([pi, left[:, -1:]], axis=1))

    @staticmethod
    def _offset_cum(prob: FloatArray) -> FloatArray:
        cum = np.cumsum(prob, axis=1)
        cum[:, -1] = 1.0
        return (cum + np.arange(len(prob))[:, None]).ravel()

    def _draw_bg(self, u: FloatArray) -> IntArray:
        idx = np.searchsorted(self.bg_cum, u, side="right")
        return np.minimum(idx, len(self.bg_cum) - 1).astype(np.int64)

    @staticmethod
    def _pick(flat: FloatArray, width: int, story: IntArray, u: FloatArray) -> IntArray:
        pos = np.searchsorted(flat, story + u, side="right")
        return np.minimum(pos, (story + 1) * width - 1).astype(np.int64)

    def sample(
        self, story: IntArray, u_comp: FloatArray, u_pick: FloatArray, residual: np.random.Generator
    ) -> IntArray:
        """Word ids (ranks) for tokens of the given stories."""
        out = np.empty(len(story), dtype=np.int64)
        is_bg = u_comp < self.w_bg[story]
        sp = ~is_bg
        width = self.sp_words.shape[1]
        out[sp] = self.sp_words.ravel()[self._pick(self.sp_flat, width, story[sp], u_pick[sp])]
        width = self.bg_words.shape[1]
        words = self.bg_words.ravel()[self._pick(self.bg_flat, width, story[is_bg], u_pick[is_bg])]
        left = words < 0
        words[left] = self._draw_bg(residual.random(int(left.sum())))
        out[is_bg] = words
        return out


class Sequencer:
    """Which story each document belongs to: births, then CRP counts plus recency."""

    def __init__(self, cfg: SynthConfig, rngs: dict[str, np.random.Generator]) -> None:
        self.cfg = cfg
        self.t = 0
        self.born = 0
        self.counts = np.zeros(cfg.n_stories, dtype=np.float64)
        self.birth_at = np.zeros(cfg.n_stories, dtype=np.float64)
        self.hot: FloatArray = rngs["hot"].gamma(0.5, 2.0 * cfg.burst_strength, cfg.n_stories)
        self.u_birth = Uniforms(rngs["birth"])
        self.u_choice = Uniforms(rngs["choice"])
        limit = cfg.burst_docs / 4
        if cfg.lifetime is not None:
            limit = min(limit, cfg.lifetime / 8)
        self.max_block = int(max(1, min(_MAX_BLOCK, limit)))
        self.pending: list[IntArray] = []
        self.n_pending = 0

    def _open(self) -> IntArray:
        k = self.born
        self.born += 1
        self.counts[k] = 1.0
        self.birth_at[k] = self.t
        self.t += 1
        self.u_choice.take(1)  # keep one choice draw per document, used or not
        return np.array([k], dtype=np.int64)

    def _block(self) -> IntArray:
        """Seat the next block of documents (at least one)."""
        if self.t == 0:
            self.u_birth.take(1)
            return self._open()
        b = max(1, min(self.max_block, self.t // 32))
        if self.born < self.cfg.n_stories:
            hits = np.flatnonzero(self.u_birth.peek(b) < self.cfg.birth_rate)
            if len(hits) and hits[0] == 0:
                self.u_birth.take(1)
                return self._open()
            if len(hits):
                b = int(hits[0])
        self.u_birth.take(b)
        nb, cfg = self.born, self.cfg
        age = self.t - self.birth_at[:nb]
        base = self.counts[:nb] + self.hot[:nb] * self.t * np.exp(-age / cfg.burst_docs)
        if cfg.lifetime is None:
            w = base
        else:
            logw = np.log(base) - age / cfg.lifetime
            w = np.exp(logw - logw.max())
        cum = np.cumsum(w)
        pos = np.searchsorted(cum, self.u_choice.take(b) * cum[-1], side="right")
        picks: IntArray = np.minimum(pos, nb - 1).astype(np.int64)
        self.counts[:nb] += np.bincount(picks, minlength=nb)
        self.t += b
        return picks

    def next(self, n: int) -> IntArray:
        """Story ids of the next ``n`` documents."""
        while self.n_pending < n:
            block = self._block()
            self.pending.append(block)
            self.n_pending += len(block)
        flat = np.concatenate(self.pending)
        self.pending = [flat[n:]]
        self.n_pending = len(flat) - n
        return flat[:n]
