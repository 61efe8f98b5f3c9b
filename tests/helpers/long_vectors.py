"""Vectors that share one large component, as mean-pooled vectors of long articles do, and the
hybrid seating them on their vectors alone."""

from __future__ import annotations

import numpy as np

from noveld.models.base import DocBatch
from noveld.models.hybrid import HybridMixture
from noveld.models.hybrid_config import HybridConfig

P = 32


def long_documents(rng: np.random.Generator, stories: int, docs: int) -> tuple[DocBatch, list]:
    """Vectors of ``stories`` stories that all share one large component, as mean-pooled vectors
    of long articles do (every pair at cosine ~0.7), in bursts of the same story; no words."""
    shared = np.zeros(P)
    shared[0] = 1.6
    labels = np.repeat(np.arange(stories), docs // stories)
    rng.shuffle(labels[len(labels) // 2 :])  # bursts first, then mixed
    emb = np.zeros((labels.shape[0], P))
    for d, s in enumerate(labels.tolist()):
        x = shared + np.eye(P)[1 + s] + 0.15 * rng.standard_normal(P)
        emb[d] = x / np.linalg.norm(x)
    batch = DocBatch.from_docs([[] for _ in labels], 2 * P)
    batch = DocBatch(batch.ptr, batch.words, batch.counts, batch.lengths, 2 * P, 2 * P, emb=emb)
    return batch, labels.tolist()


def seat(batch: DocBatch, centre: bool, prior: bool = False, cosine: float = 0.4) -> list[int]:
    """Assignments in batches of 40 with the vectors centred, or raw under the direction prior
    (``prior``) or the uniform one, at the typical cosine ``cosine``."""
    model = HybridMixture(HybridConfig(dimension=P, view_weight=1.0, cosine=cosine, centre=centre,
                                       alpha=0.3, alpha_scaling="none",
                                       direction_prior=prior))  # fmt: skip
    model.bind_dimension_words(list(range(0, 2 * P, 2)), list(range(1, 2 * P, 2)))
    model.uncounted_words = lambda: np.arange(2 * P)
    stats, rng, out = model.new_state(), np.random.default_rng(0), []
    for start in range(0, len(batch), 40):
        idx = np.arange(start, min(start + 40, len(batch)))
        part = DocBatch(np.zeros(idx.shape[0] + 1, dtype=np.int64), batch.words[:0],
                        batch.counts[:0], np.zeros(idx.shape[0], dtype=np.int64), 2 * P, 2 * P,
                        emb=batch.emb[idx])  # fmt: skip
        out += model.partial_fit(part, stats, rng).assignments.tolist()
    return out
