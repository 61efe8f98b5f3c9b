"""The small hybrid (words × vectors) states shared by its test modules: random batches, a
configured model, and the dense oracle of one document's log seating weights."""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln

from noveld.models.base import DocBatch
from noveld.models.hybrid import HybridConfig, HybridMixture
from noveld.models.kernels import vmf as vkern

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
) -> tuple[np.ndarray, float]:  # fmt: skip
    """Log seating weights of one document (word counts over V, unit vector or None) from
    scratch with gammaln: CRP prior × (DM predictive relative to the empty cluster)^τ × vMF^w,
    τ = (1 + s)/(n + s) for a document of n tokens (1 when s = 0)."""
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
    if x is not None and w:
        new += w * vkern.log_sphere_density_at_zero(p)
    return out, float(new)
