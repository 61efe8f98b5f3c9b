"""The random consistent hdp batch states (and their constants) shared by the hdp sampler and
group-score test modules: counts, categories and the sparse indexes built the slow way."""

from __future__ import annotations

import numpy as np

from noveld.models.kernels import hdp_scores as sc

BETA, ZETA, GAMMA = 0.01, 0.05, 3.0
N_WORDS, N_TOPICS, N_CATS, ROOM = 12, 9, 6, 4
VBETA = 40 * BETA  # a vocabulary of 40 words; the batch holds 12 of them


def numpy_indexes(
    nlw: np.ndarray, okl: np.ndarray, n_cats: int, tokens: np.ndarray
) -> tuple[np.ndarray, ...]:
    """The sampler's sparse indexes built the slow way (layout: kernels/hdp_scores.py)."""
    cap, n_topics = okl.shape
    innz = np.zeros((cap, n_topics), dtype=np.bool_)
    innz[:n_cats] = okl[:n_cats] > 0
    nz = np.zeros((cap, n_topics), dtype=np.int64)
    nzlen = innz.sum(axis=1).astype(np.int64)
    cz = np.zeros((n_topics, cap), dtype=np.int64)
    czlen = innz.sum(axis=0).astype(np.int64)
    for k in range(cap):
        nz[k, : nzlen[k]] = np.flatnonzero(innz[k])
    for y in range(n_topics):
        cz[y, : czlen[y]] = np.flatnonzero(innz[:, y])
    have = (nlw > 0).sum(axis=1)
    wz_ptr = np.concatenate([[0], np.cumsum(have + tokens + 1)]).astype(np.int64)
    wz = np.zeros(int(wz_ptr[-1]), dtype=np.int64)
    for w in range(nlw.shape[0]):
        wz[wz_ptr[w] : wz_ptr[w] + have[w]] = np.flatnonzero(nlw[w] > 0)
    return nz, nzlen, innz, cz, czlen, wz, wz_ptr, have.astype(np.int64)


class State:
    """A random but consistent batch state: topics 6..8 unused (truly empty), some categories
    on one topic, some spread, one with no table. Counts are real numbers (as under
    forgetting), so that no two candidates tie exactly; ties are broken by rules the oracle
    need not copy."""

    def __init__(self, seed: int) -> None:
        rng = np.random.default_rng(seed)
        used = 6
        self.nlw = np.zeros((N_WORDS, N_TOPICS))
        self.nlw[:, :used] = rng.uniform(0.5, 4.0, size=(N_WORDS, used)) * (
            rng.random((N_WORDS, used)) < 0.35
        )
        self.nl = self.nlw.sum(axis=0) + np.where(np.arange(N_TOPICS) < used, 5.0, 0.0)
        cap = N_CATS + ROOM
        self.okl = np.zeros((cap, N_TOPICS))
        for k in range(N_CATS):
            main = rng.integers(0, used)
            self.okl[k, main] = rng.uniform(1.0, 30.0)
            if rng.random() < 0.5:
                other = rng.integers(0, used)
                self.okl[k, other] += rng.uniform(1.0, 10.0)
        self.ok = self.okl.sum(axis=1)
        self.mk = np.where(self.ok > 0, rng.integers(1, 8, size=cap).astype(float), 0.0)
        self.mk[N_CATS - 1] = 0.0  # a category with no table cannot be chosen
        self.alive = np.zeros(cap, dtype=np.bool_)
        self.alive[:N_CATS] = True
        self.uid = np.arange(cap, dtype=np.int64)
        self.inv = 1.0 / (VBETA + self.nl)
        self.tokens = rng.integers(1, 4, size=N_WORDS)  # the batch's tokens of each word
        self.ix = numpy_indexes(self.nlw, self.okl, N_CATS, self.tokens)
        self.tw = (self.nlw, self.nl, self.inv, np.array([self.inv.sum()]))
        self.cat = (self.okl, self.ok, self.mk, self.alive, self.uid)
        empty = np.flatnonzero(self.nl < sc.EMPTY_BELOW)
        self.ctl = np.array([N_CATS, 100, 0, empty.shape[0], empty[0]], dtype=np.int64)

    def phi(self) -> np.ndarray:
        """φ[l, w] = (β + n_lw)/(Vβ + n_l), dense."""
        return (BETA + self.nlw.T) / (VBETA + self.nl)[:, None]
