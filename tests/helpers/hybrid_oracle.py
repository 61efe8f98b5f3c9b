"""The small hybrid (words × vectors) states shared by its test modules: random batches, a
configured model, the dense oracle of one document's log seating weights and of a batch's
seating, and the kernel run as ``partial_fit`` runs it."""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln

from noveld.models.base import DocBatch
from noveld.models.direction_prior import DirectionPrior
from noveld.models.hybrid import HybridConfig, HybridMixture
from noveld.models.hybrid_batch import seating_state
from noveld.models.kernels import hybrid as hkern
from noveld.models.kernels import multinomial as kern
from noveld.models.kernels import vmf as vkern
from noveld.models.suffstats import MultinomialStats

P = 6  # vector dimension of the small states
V = 20  # words; ids 2P .. 2P+V−1 (the dimensions' reserved entries come first)


def make_batch(
    rng: np.random.Generator, n: int, with_words: float = 1.0, with_vectors: float = 1.0
) -> DocBatch:
    """Documents of 0–12 words (repeats allowed), each with a unit vector near one of three
    directions or none (a zero row), words and vectors both present with the given odds."""
    centres = np.eye(P)[:3]
    docs: list[list[int]] = []
    emb = np.zeros((n, P))
    for d in range(n):
        topic = int(rng.integers(0, 3))
        if rng.random() < with_words:
            size = int(rng.integers(1, 13))
            pool = np.arange(topic * 6, topic * 6 + 9) % V  # overlapping word sets per topic
            docs.append((2 * P + rng.choice(pool, size)).tolist())
        else:
            docs.append([])
        if rng.random() < with_vectors:
            x = centres[topic] + 0.6 * rng.standard_normal(P)
            emb[d] = x / np.linalg.norm(x)
    batch = DocBatch.from_docs(docs, 2 * P + V)
    return DocBatch(batch.ptr, batch.words, batch.counts, batch.lengths, 2 * P + V, 2 * P,
                    emb=emb)  # fmt: skip


def hybrid(w: float, **cfg: float | bool | int) -> HybridMixture:
    config = dict(alpha=0.5, beta=0.1, alpha_scaling="none", retire_min_mass=0.0,
                  deterministic=True, cosine=0.6, dimension=P, view_weight=w)  # fmt: skip
    config.update(cfg)
    model = HybridMixture(HybridConfig(**config))  # type: ignore[arg-type]
    model.bind_dimension_words(list(range(0, 2 * P, 2)), list(range(1, 2 * P, 2)))
    model.uncounted_words = lambda: np.arange(2 * P)  # as the pipeline binds it
    return model


# ---- the dense oracle ----------------------------------------------------------------------
def oracle_weights(
    x_words: np.ndarray, x: np.ndarray | None, m: list[float], n: list[np.ndarray],
    r: list[np.ndarray], live: list[bool], cfg: HybridConfig, vbeta: float, log_alpha: float,
    prior: np.ndarray | None = None,
) -> tuple[np.ndarray, float]:  # fmt: skip
    """Log seating weights of one document (word counts over V, unit vector or None) from
    scratch with gammaln: CRP prior × (DM predictive relative to the empty cluster)^τ × vMF^w,
    τ = (1 + s)/(n + s) for a document of n tokens (1 when s = 0); the new cluster's vMF
    predictive is the uniform density, or that of a cluster of resultant ``prior``."""
    beta, d, p, kappa, w = cfg.beta, cfg.discount, cfg.dimension, cfg.kappa, cfg.weight
    nd = float(x_words.sum())
    s = cfg.document_concentration
    tau = min(1.0, (1.0 + s) / (max(nd, 1.0) + s)) if s > 0 else 1.0
    logc = vkern.log_vmf_normalizer
    base = float((gammaln(beta + x_words) - gammaln(beta)).sum())
    out = np.full(len(m), -np.inf)
    for k in range(len(m)):
        if not live[k]:
            continue
        nk = float(n[k].sum())
        words = float((gammaln(n[k] + beta + x_words) - gammaln(n[k] + beta)).sum()) - base
        dm = gammaln(nk + vbeta) - gammaln(nk + nd + vbeta) + words
        out[k] = math.log(max(m[k] - d, 1e-3)) + tau * dm
        if x is not None and w:
            rk = float(np.linalg.norm(r[k]))
            out[k] += w * (logc(p, kappa) + logc(p, kappa * rk)
                           - logc(p, kappa * float(np.linalg.norm(r[k] + x))))  # fmt: skip
    new = math.log(math.exp(log_alpha) + d * sum(live))
    new += tau * (gammaln(vbeta) - gammaln(nd + vbeta))
    if x is not None and w and prior is None:
        new += w * vkern.log_sphere_density_at_zero(p)
    elif x is not None and w:
        a = float(np.linalg.norm(prior))
        new += w * (logc(p, kappa) + logc(p, kappa * a)
                    - logc(p, kappa * float(np.linalg.norm(prior + x))))  # fmt: skip
    return out, float(new)


def oracle_seat(
    model: HybridMixture,
    stats: MultinomialStats,
    batch: DocBatch,
    sweeps: int,
    prior: np.ndarray | None = None,
) -> tuple[list[int], list[float], list[float], int]:
    """MAP sequential seating + sweeps with every weight recomputed from dense statistics;
    ties within ``TIE_TOL`` go to a new cluster, then to the oldest. Returns slots (existing
    clusters first, then new ones in opening order), log normalisers, margins, the old count.
    ``prior``: the base measure's pseudo-resultant a·μ₀, in every cluster's resultant (None:
    the uniform prior)."""
    zero = np.zeros(P) if prior is None else prior
    cfg = model.config
    kmax = stats.kmax
    res = model.resultants(stats)
    m = [float(stats.m[k] * stats.scale) if stats.alive[k] else 0.0 for k in range(kmax)]
    live = [bool(stats.alive[k]) for k in range(kmax)]
    n: list[np.ndarray] = []
    for k in range(kmax):
        counts = np.zeros(V)
        if live[k]:
            ws, cs = model.term_weights(stats, int(stats.uid[k]))
            counts[ws - 2 * P] = cs
        n.append(counts)
    r = [res[k] + zero if live[k] else res[k].copy() for k in range(kmax)]
    order = [int(stats.uid[k]) if live[k] else -1 for k in range(kmax)]
    vbeta = batch.n_words * cfg.beta
    log_alpha = model.log_alpha(len(batch))
    docs = []
    for d in range(len(batch)):
        w, c = batch.doc(d)
        xw = np.zeros(V)
        xw[w - 2 * P] = c
        vec = batch.emb[d] if batch.emb is not None and batch.emb[d].any() else None
        docs.append((xw, vec))
    assign = [-1] * len(batch)
    norms, margins = [0.0] * len(batch), [0.0] * len(batch)
    next_order = max(order, default=-1) + 1
    for sweep in range(sweeps + 1):
        for d, (xw, vec) in enumerate(docs):
            if sweep:
                k = assign[d]
                m[k] -= 1
                n[k] -= xw
                if vec is not None:
                    r[k] -= vec
                if k >= kmax and m[k] < 0.5:
                    live[k] = False
            s, new = oracle_weights(xw, vec, m, n, r, live, cfg, vbeta, log_alpha, prior)
            finite = s[np.isfinite(s)]
            if sweep == 0:
                norms[d] = float(np.logaddexp.reduce(np.append(finite, new)))
                margins[d] = min(new - (finite.max() if finite.size else -np.inf), 1000.0)
            top = max(new, finite.max() if finite.size else -np.inf)
            tied = [k for k in range(len(m)) if live[k] and s[k] >= top - kern.TIE_TOL]
            if new >= top - kern.TIE_TOL:
                k_old = assign[d] if sweep else -1
                if k_old >= kmax and not live[k_old]:
                    best = k_old
                else:
                    free = [j for j in range(kmax, len(m)) if not live[j]]
                    best = free[0] if free else len(m)
                    if best == len(m):
                        m.append(0.0)
                        n.append(np.zeros(V))
                        r.append(zero.copy())
                        live.append(False)
                        order.append(0)
                    m[best], n[best], r[best] = 0.0, np.zeros(V), zero.copy()
                    order[best] = next_order
                    next_order += 1
                live[best] = True
            else:
                best = min(tied, key=lambda k: order[k])
            m[best] += 1
            n[best] += xw
            if vec is not None:
                r[best] += vec
            assign[d] = best
    return assign, norms, margins, kmax


def run_kernel(
    model: HybridMixture,
    stats: MultinomialStats,
    batch: DocBatch,
    sweeps: int,
    want_norm: bool = True,
    prior: DirectionPrior | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The kernel on the same state (read-only), as ``partial_fit`` calls it (which asks for
    no log normalisers: ``want_norm`` False), under the base measure ``prior`` (None: the
    uniform one)."""
    cfg = model.config
    nb = len(batch)
    assert batch.emb is not None
    prior = prior or DirectionPrior(None)
    kmax = stats.kmax
    mass = np.where(stats.alive[:kmax], stats.m[:kmax], 0.0)
    s = seating_state(stats, prior.resultants(model.resultants(stats), mass), batch.emb, 1.0)
    local, loc = np.unique(batch.words, return_inverse=True)
    assign, log_norm, margin = np.empty(nb, dtype=np.int64), np.empty(nb), np.empty(nb)
    hkern.seat_batch(
        batch.ptr, batch.words, batch.counts, batch.lengths, loc.astype(np.int64),
        local.shape[0], s.gram, s.dots, s.mass, s.ntok, s.rn2, s.live, s.tie_uid, stats.kmax,
        stats.head, stats.nxt, stats.pk, stats.pc, stats.scale, cfg.beta,
        batch.n_words * cfg.beta, cfg.discount, model.log_alpha(nb), cfg.dimension, cfg.kappa,
        model.table, cfg.weight, True, want_norm, np.zeros(nb * (1 + sweeps)), sweeps,
        np.full(nb, -1), assign, log_norm, margin, cfg.tempering(batch.lengths),
        *prior.new_slot(batch.emb),
    )  # fmt: skip
    return assign, log_norm, margin
