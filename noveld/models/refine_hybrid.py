"""Offline refinement of a streaming hybrid partition (``noveld fit --likelihood hybrid``).

Blocked collapsed Gibbs over the whole archive under words × vMF^w, started from the pass's
partition: each block of documents is taken out of the statistics and seated again by the
hybrid's own batch kernel (:func:`~noveld.models.kernels.hybrid.seat_batch`: a sequential
seating, then one Gibbs sweep of the block) against every other document, with the length
tempering τ the stream used. Blocks keep the kernel's block × block gram matrix small. Pure:
arrays in, arrays out.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from noveld.models.base import DocBatch
from noveld.models.direction_prior import DirectionPrior
from noveld.models.hybrid_batch import Centring
from noveld.models.hybrid_config import HybridConfig
from noveld.models.kernels import hybrid as hkern
from noveld.models.kernels import multinomial as kern
from noveld.models.kernels import vmf_table as vtable
from noveld.models.refine import Refinement, add_documents, partition_key, partition_stats
from noveld.models.suffstats import MultinomialStats

#: documents reseated together: the kernel's gram matrix is block × block
BLOCK_DOCS = 256


def refine_hybrid_partition(
    batch: DocBatch,
    uids: np.ndarray,
    config: HybridConfig,
    log_alpha: float,
    sweeps: int,
    fixed: np.ndarray,
    next_uid: int,
    rng: np.random.Generator,
    on_sweep: Callable[[int, int, int], None] | None = None,
    block: int = BLOCK_DOCS,
) -> Refinement:
    """``sweeps`` blocked collapsed Gibbs sweeps over every document of ``batch`` (words and
    ``batch.emb``, unit rows or zero rows for none), started from ``uids``; the rest as
    :func:`~noveld.models.refine.refine_partition`: MAP when ``config.deterministic``,
    ``fixed`` documents stay, a cluster every document left is gone, a document seated alone
    keeps its cluster's uid when it was alone already (else a new uid from ``next_uid`` on),
    MAP sweeps stop at a fixed point or when they come back to a partition they left (blocks
    seated one after another may trade a few documents back and forth for ever)."""
    n = len(batch)
    p = config.dimension
    emb = np.zeros((n, p)) if batch.emb is None else batch.emb
    if emb.shape != (n, p):
        raise ValueError(f"hybrid refinement: the vectors must be ({n}, {p})")
    if config.centre:  # scored as the stream scores them: around the archive's mean vector
        emb = Centring.of(emb[:0], np.zeros(0), emb).vectors(emb)
    stats, slots = partition_stats(batch, uids, next_uid)
    res = np.zeros((stats.m.shape[0], p))
    np.add.at(res, slots, emb)
    table = vtable.normalizer_table(p, config.kappa)
    tau = config.tempering(batch.lengths)
    prior = DirectionPrior(None)
    if config.direction_prior and not config.centre:  # the stream's, from the pass's partition
        kmax = stats.kmax
        m = stats.m[:kmax]
        prior = DirectionPrior.of_clusters(res[:kmax], m, None, config.prior_cosine, True)
    free = np.flatnonzero(~fixed)
    per_sweep: list[int] = []
    seen = {partition_key(slots)}
    for i in range(sweeps):
        moved = 0
        for start in range(0, free.shape[0], block):
            idx = free[start : start + block]
            res, moved_here = _reseat_block(
                batch, emb, idx, slots, stats, res, config, log_alpha, table, tau, prior, rng
            )
            moved += moved_here
        per_sweep.append(moved)
        if on_sweep is not None:
            on_sweep(i, moved, int(np.count_nonzero(stats.m[: stats.kmax] > 0.5)))
        key = partition_key(slots)
        if config.deterministic and (moved == 0 or key in seen):
            break  # a fixed point, or a cycle of MAP block moves: the next would repeat it
        seen.add(key)
    return Refinement(
        uids=stats.uid[slots].copy(),
        moved=per_sweep,
        next_uid=int(stats.ictl[kern.NEXT_UID]),
    )


def _reseat_block(
    batch: DocBatch,
    emb: np.ndarray,
    idx: np.ndarray,
    slots: np.ndarray,
    stats: MultinomialStats,
    res: np.ndarray,
    config: HybridConfig,
    log_alpha: float,
    table: np.ndarray,
    tau: np.ndarray,
    prior: DirectionPrior,
    rng: np.random.Generator,
) -> tuple[np.ndarray, int]:
    """Take documents ``idx`` out, seat them again against all the others, put them back;
    updates ``slots`` and ``stats`` in place, returns the resultants and how many moved."""
    nb = idx.shape[0]
    old = slots[idx].copy()
    add_documents(stats, batch, idx, slots, -1.0)
    np.subtract.at(res, old, emb[idx])
    kmax = stats.kmax
    live = np.zeros(kmax + nb, dtype=np.bool_)
    live[:kmax] = stats.m[:kmax] > 0.5  # a cluster the block emptied is gone meanwhile
    mass = np.zeros(kmax + nb)
    mass[:kmax] = np.where(live[:kmax], stats.m[:kmax], 0.0)
    ntok = np.zeros(kmax + nb)
    ntok[:kmax] = np.where(live[:kmax], stats.ntok[:kmax], 0.0)
    r = prior.resultants(np.where(live[:kmax, None], res[:kmax], 0.0), mass[:kmax])
    rn2 = np.zeros(kmax + nb)
    rn2[:kmax] = np.einsum("kj,kj->k", r, r)
    tie_uid = np.zeros(kmax + nb, dtype=np.int64)
    tie_uid[:kmax] = stats.uid[:kmax]
    x = emb[idx]
    dots = np.zeros((kmax + nb, nb))
    np.matmul(r, x.T, out=dots[:kmax])
    ptr, words, counts, lengths = _sub_batch(batch, idx)
    local, loc = np.unique(words, return_inverse=True)
    assign = np.empty(nb, dtype=np.int64)
    log_norm, margin = np.empty(nb), np.empty(nb)
    hkern.seat_batch(
        ptr, words, counts, lengths, loc.astype(np.int64), local.shape[0], x @ x.T, dots, mass,
        ntok, rn2, live, tie_uid, kmax, stats.head, stats.nxt, stats.pk, stats.pc, 1.0,
        config.beta, batch.n_words * config.beta, config.discount, log_alpha, config.dimension,
        config.kappa, table, config.weight, config.deterministic, False, rng.random(2 * nb), 1,
        np.full(nb, -1, dtype=np.int64), assign, log_norm, margin, tau[idx], *prior.new_slot(x),
    )  # fmt: skip
    # new slots become clusters in order of their first document: the cluster that document
    # left when the block emptied it (its uid kept), else a new one
    slot_of: dict[int, int] = {}
    for j, k in enumerate(assign.tolist()):
        if k < kmax or k in slot_of:
            continue
        own = int(old[j])
        if not live[own] and own not in slot_of.values():
            slot_of[k] = own
        else:
            slot_of[k] = _open(stats)
    new = np.array([slot_of.get(k, k) for k in assign.tolist()], dtype=np.int64)
    slots[idx] = new
    if stats.kmax > res.shape[0]:
        res = np.concatenate([res, np.zeros((stats.m.shape[0] - res.shape[0], res.shape[1]))])
    stats.reserve(0, int(ptr[-1]), batch.vocab_size)
    add_documents(stats, batch, idx, slots, 1.0)
    np.add.at(res, new, x)
    return res, int(np.count_nonzero(stats.uid[new] != stats.uid[old]))


def _open(stats: MultinomialStats) -> int:
    """A new cluster slot with the next uid."""
    stats.reserve(1, 0, 0)
    k = stats.kmax
    stats.alive[k] = True
    stats.uid[k] = stats.ictl[kern.NEXT_UID]
    stats.ictl[kern.KMAX] = k + 1
    stats.ictl[kern.NEXT_UID] += 1
    return k


def _sub_batch(
    batch: DocBatch, idx: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The ptr, words, counts and lengths of documents ``idx`` as a batch of their own."""
    starts, ends = batch.ptr[idx], batch.ptr[idx + 1]
    sizes = ends - starts
    ptr = np.zeros(idx.shape[0] + 1, dtype=np.int64)
    np.cumsum(sizes, out=ptr[1:])
    at = np.repeat(starts - ptr[:-1], sizes) + np.arange(int(ptr[-1]))
    return ptr, batch.words[at].astype(np.int64), batch.counts[at], batch.lengths[idx]


def with_vector_entries(batch: DocBatch, pos: np.ndarray, neg: np.ndarray) -> DocBatch:
    """The batch with each document's vector appended to its entries as the hybrid keeps it:
    the positive and negative parts of component j on reserved ids ``pos[j]`` / ``neg[j]``
    (float counts, not tokens: the lengths stay the words'), so that
    :func:`~noveld.models.refine.partition_stats` builds the hybrid's statistics."""
    n = len(batch)
    emb = np.zeros((n, pos.shape[0])) if batch.emb is None else batch.emb
    ids = np.where(emb > 0.0, pos[None, :], neg[None, :])
    on = emb != 0.0
    words, counts = [], []
    for d in range(n):
        w, c = batch.doc(d)
        words.append(np.concatenate([w.astype(np.int64), ids[d, on[d]]]))
        counts.append(np.concatenate([c.astype(np.float64), np.abs(emb[d, on[d]])]))
    sizes = np.array([w.shape[0] for w in words], dtype=np.int64)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=ptr[1:])
    return DocBatch(
        ptr=ptr,
        words=np.concatenate(words) if words else np.zeros(0, np.int64),
        counts=np.concatenate(counts) if counts else np.zeros(0),
        lengths=batch.lengths,
        vocab_size=batch.vocab_size,
        reserved=batch.reserved,
        dropped=batch.dropped,
        emb=batch.emb,
    )
