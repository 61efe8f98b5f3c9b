"""Offline refinement of a streaming ``dpmm`` partition (``noveld fit``).

The streaming pass seats each document once, against the clusters of the documents before it;
a story whose first documents were read before its words were known ends up in fragments.
Collapsed Gibbs sweeps over the *whole* archive (paper 004, Algorithm 1 — every document
removed and reseated from its complete conditional, eq. 4's predictive, the Pitman–Yor prior
of ``dpmm``), started from the pass's partition instead of from scratch, let every document see
every other one. Pure: arrays in, arrays out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from noveld.models.base import DocBatch
from noveld.models.dpmm import DPMMConfig
from noveld.models.kernels import multinomial as kern
from noveld.models.suffstats import MultinomialStats


@dataclass(frozen=True)
class Refinement:
    """The refined partition: each document's cluster uid and the moves of each sweep."""

    uids: np.ndarray
    moved: list[int]
    next_uid: int


def partition_stats(
    batch: DocBatch,
    uids: np.ndarray,
    next_uid: int,
    weights: np.ndarray | None = None,
) -> tuple[MultinomialStats, np.ndarray]:
    """Statistics of a partition: document ``d`` added with ``weights[d]`` (default 1) to the
    cluster of ``uids[d]`` (slots in order of first document, the uids kept); returns the
    statistics and each document's slot. ``next_uid`` is the uid a new cluster would get."""
    stats = MultinomialStats()
    distinct, first = np.unique(uids, return_index=True)
    order = distinct[np.argsort(first)]
    stats.reserve(order.shape[0], batch.nnz, batch.vocab_size)
    slot_of = {int(u): k for k, u in enumerate(order.tolist())}
    n = order.shape[0]
    stats.alive[:n] = True
    stats.uid[:n] = order
    stats.ictl[kern.KMAX] = n
    stats.ictl[kern.NEXT_UID] = next_uid
    slots = np.array([slot_of[int(u)] for u in uids.tolist()], dtype=np.int64)
    w = np.ones(len(batch)) if weights is None else weights
    add_documents(stats, batch, np.arange(len(batch)), slots, w)
    return stats, slots


def add_documents(
    stats: MultinomialStats,
    batch: DocBatch,
    docs: np.ndarray,
    slots: np.ndarray,
    weights: np.ndarray | float,
) -> None:
    """Add the words of documents ``docs`` at their ``slots``, document d with weight
    ``weights[d]`` (or one weight for all: −1 takes them out)."""
    w = np.broadcast_to(np.asarray(weights, dtype=np.float64), (len(batch),))
    for d in docs.tolist():
        words, counts = batch.doc(d)
        kern.add_document(
            int(slots[d]), words, counts, int(batch.lengths[d]), float(w[d]), stats.m,
            stats.ntok, stats.head, stats.nxt, stats.pk, stats.pc, stats.ictl,
        )  # fmt: skip


def refine_partition(
    batch: DocBatch,
    uids: np.ndarray,
    config: DPMMConfig,
    log_alpha: float,
    sweeps: int,
    fixed: np.ndarray,
    next_uid: int,
    rng: np.random.Generator,
    on_sweep: Callable[[int, int, int], None] | None = None,
) -> Refinement:
    """``sweeps`` collapsed Gibbs sweeps over every document of ``batch``, started from
    ``uids`` (MAP reseating when ``config.deterministic``, else sampled). ``log_alpha`` is the
    new-cluster weight the stream used (α·|B| under batch scaling); documents with ``fixed``
    (known labels) stay where they are. A cluster every document left is gone; a document
    better alone opens a cluster with a new uid (from ``next_uid`` on), or keeps its own if it
    was alone already. MAP sweeps stop early once one moves nothing (a fixed point).
    ``on_sweep(i, moved, clusters)`` follows the progress."""
    stats, slots = partition_stats(batch, uids, next_uid)
    stats.fresh[: stats.kmax] = True  # every cluster may empty and go
    moved = np.zeros(1, dtype=np.int64)
    per_sweep: list[int] = []
    for i in range(sweeps):
        # room for one sweep (every document moved, each alone): the pool drops the entries
        # emptied by earlier sweeps when it runs short (bit-identical scores), so memory
        # stays that of the archive's counts whatever the number of sweeps
        stats.reserve(len(batch), batch.nnz, batch.vocab_size)
        scratch = np.empty(stats.m.shape[0])
        kern.reseat_documents(
            batch.ptr, batch.words, batch.counts, batch.lengths, slots, fixed,
            rng.random(len(batch)), 1, log_alpha, config.beta, batch.n_words * config.beta,
            config.deterministic, 1.0, config.discount, stats.m, stats.ntok, stats.alive,
            stats.fresh, stats.uid, stats.head, stats.nxt, stats.pk, stats.pc, stats.free_stack,
            stats.ictl, scratch, moved, config.document_concentration,
        )  # fmt: skip
        per_sweep.append(int(moved[0]))
        if on_sweep is not None:
            on_sweep(i, per_sweep[-1], int(stats.alive[: stats.kmax].sum()))
        if config.deterministic and per_sweep[-1] == 0:
            break  # MAP sweeps have converged: the next would change nothing either
    return Refinement(
        uids=stats.uid[slots].copy(),
        moved=per_sweep,
        next_uid=int(stats.ictl[kern.NEXT_UID]),
    )


def partition_key(slots: np.ndarray) -> bytes:
    """The partition, whatever its clusters' slots or uids: clusters numbered by first
    document (for telling a cycle of MAP sweeps from progress)."""
    _, first, inverse = np.unique(slots, return_index=True, return_inverse=True)
    rank = np.empty(first.shape[0], dtype=np.int64)
    rank[np.argsort(first)] = np.arange(first.shape[0])
    return bytes(rank[inverse].tobytes())


def forgetting_weights(n_docs: int, half_life_docs: float) -> np.ndarray:
    """Each document's weight at the end of a stream of ``n_docs`` under exponential forgetting:
    ``2^(−later/h)`` with ``later`` the documents after it (all 1 without forgetting)."""
    if half_life_docs <= 0:
        return np.ones(n_docs)
    later = np.arange(n_docs - 1, -1, -1, dtype=np.float64)
    return np.asarray(np.exp2(-later / half_life_docs))
