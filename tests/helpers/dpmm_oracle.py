"""Oracles and fixtures of the multinomial dpmm shared by its test modules: random documents,
statistics and seating weights rebuilt densely from scratch, a fitted state, and the
log-joint that merge and split gains are checked against."""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln

from noveld.models.base import DocBatch
from noveld.models.dpmm import DPMM, DPMMConfig
from noveld.models.suffstats import MultinomialStats


def random_docs(rng: np.random.Generator, n: int, vocab: int, max_len: int = 8) -> list[list[int]]:
    """Documents with repeated words allowed (exercises N_dw > 1)."""
    return [list(rng.integers(0, vocab, size=int(rng.integers(1, max_len + 1)))) for _ in range(n)]


def dense_counts(
    docs: list[list[int]], uids: list[int], vocab: int
) -> tuple[dict[int, int], dict[int, np.ndarray]]:
    """Oracle statistics rebuilt from scratch: documents per cluster and word counts."""
    m: dict[int, int] = {}
    n: dict[int, np.ndarray] = {}
    for d, u in zip(docs, uids, strict=True):
        m[u] = m.get(u, 0) + 1
        n.setdefault(u, np.zeros(vocab))
        np.add.at(n[u], d, 1)
    return m, n


def oracle_log_weights(
    doc: list[int],
    m: dict[int, int],
    n: dict[int, np.ndarray],
    vocab: int,
    alpha: float,
    beta: float,
    discount: float = 0.0,
    concentration: float = 0.0,
) -> dict[int, float]:
    """log(m_k − d) + τ log p(d | k) by paper 004 eq. 4 with gammaln; key -1 is the new
    cluster, weighted by the Pitman–Yor α + d·K (d = 0: the Dirichlet process). τ is the
    length tempering (1 + s)/(n + s) of s = ``concentration`` (s = 0: τ = 1)."""
    x = np.bincount(doc, minlength=vocab).astype(float)
    nd = x.sum()
    vb = vocab * beta
    s = concentration
    tau = min(1.0, (1.0 + s) / (max(nd, 1.0) + s)) if s > 0 else 1.0

    def logpred(counts: np.ndarray) -> float:
        nk = counts.sum()
        return float(
            gammaln(nk + vb)
            - gammaln(nk + nd + vb)
            + (gammaln(counts + beta + x) - gammaln(counts + beta)).sum()
        )

    out = {u: float(np.log(m[u] - discount)) + tau * logpred(n[u]) for u in m}
    out[-1] = float(np.log(alpha + discount * len(m))) + tau * logpred(np.zeros(vocab))
    return out


Fitted = tuple[DPMM, MultinomialStats, list[list[int]], list[int]]


def fitted_state(
    seed: int,
    vocab: int = 30,
    n_docs: int = 60,
    sweeps: int = 1,
    half_life: float = 0.0,
    discount: float = 0.0,
    concentration: float = 0.0,
) -> Fitted:
    """A sampled dpmm fitted on ``n_docs`` random documents in batches of 20: the model, its
    statistics, the documents and their clusters."""
    rng = np.random.default_rng(seed)
    model = DPMM(
        DPMMConfig(
            alpha=0.5,
            beta=0.1,
            alpha_scaling="none",
            rejuvenation_sweeps=sweeps,
            deterministic=False,
            half_life_docs=half_life,
            retire_min_mass=0.0,
            discount=discount,
            document_concentration=concentration,
        )
    )
    stats = model.new_state()
    docs = random_docs(rng, n_docs, vocab)
    uids: list[int] = []
    for i in range(0, n_docs, 20):
        res = model.partial_fit(DocBatch.from_docs(docs[i : i + 20], vocab), stats, rng)
        uids += res.assignments.tolist()
    return model, stats, docs, uids


def log_joint(m: np.ndarray, n: np.ndarray, beta: float, theta: float, d: float) -> float:
    """Pitman–Yor EPPF (up to terms a merge leaves alone) + Dirichlet–multinomial marginals;
    m − d floored at 1e-3 as the kernels do (forgetting can fade a cluster's mass below d)."""
    vocab = n.shape[1]
    kk = m.shape[0]
    prior = sum(math.log(theta + i * d) for i in range(1, kk))
    prior += float(np.sum(gammaln(np.maximum(m - d, 1e-3)) - gammaln(1 - d)))
    tok = n.sum(axis=1)
    lik = np.sum(gammaln(vocab * beta) - gammaln(vocab * beta + tok))
    lik += np.sum(gammaln(beta + n) - gammaln(beta))
    return prior + float(lik)
