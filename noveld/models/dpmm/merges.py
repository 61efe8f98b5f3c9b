"""MAP merges of the DP mixture: a batch's births merged into another cluster when that raises
the collapsed posterior, and (with known labels) other clusters absorbed into known ones."""

from __future__ import annotations

import math
from collections.abc import Collection

import numpy as np

from noveld.models.base import DocBatch
from noveld.models.dpmm.clusters import Move, move_counts
from noveld.models.dpmm.config import DPMMConfig
from noveld.models.dpmm.reconcile import (
    allowed_pairs,
    greedy_merges,
    merge_candidates,
    scan_words,
)
from noveld.models.kernels import multinomial as kern
from noveld.models.suffstats import MultinomialStats


def absorption_gains(
    stats: MultinomialStats,
    known_slots: np.ndarray,
    eligible: np.ndarray,
    scan_words: np.ndarray,
    beta: float,
    vbeta: float,
    log_new: float,
    discount: float,
) -> np.ndarray:
    """``gains[i, k]``: the collapsed posterior log-ratio of merging cluster k into known
    category ``known_slots[i]`` (:func:`kern.merge_gains`: the Dirichlet–multinomial marginal
    over ``scan_words`` and the Pitman–Yor partition prior), −inf where ``eligible[k]`` is
    False (known categories themselves, and whatever else may not be absorbed)."""
    kmax = stats.kmax
    gains = np.empty((known_slots.shape[0], kmax))
    kern.merge_gains(
        known_slots, scan_words, stats.m, stats.ntok, stats.alive, stats.head, stats.nxt,
        stats.pk, stats.pc, kmax, stats.scale, beta, vbeta, log_new, discount, gains,
    )  # fmt: skip
    gains[:, ~eligible[:kmax]] = -np.inf
    return gains


def greedy_absorptions(
    gains: np.ndarray, known_slots: np.ndarray, margin: float, taken: set[int]
) -> list[tuple[int, int]]:
    """(source slot, known slot) pairs whose gain exceeds ``margin``, best first; each source
    is absorbed once (a known category may absorb several) and none of ``taken`` is."""
    rows, cols = np.nonzero(gains > margin)
    order = np.argsort(-gains[rows, cols], kind="stable")
    out: list[tuple[int, int]] = []
    for i in order.tolist():
        src, dst = int(cols[i]), int(known_slots[rows[i]])
        if src in taken:
            continue
        taken.add(src)
        out.append((src, dst))
    return out


def merge_births(
    batch: DocBatch,
    assign: np.ndarray,
    stats: MultinomialStats,
    cfg: DPMMConfig,
    log_alpha: float,
    pinned: Collection[int],
) -> list[Move]:
    """Merge clusters born in this batch or recently, by this writer or another one
    (:func:`merge_candidates`), into another cluster when that raises the collapsed posterior
    (MAP merge test, :func:`kern.merge_gains`); greedy, best gain first, each cluster in one
    merge at most. ``log_alpha`` is the batch's new-cluster weight; ``pinned`` clusters are
    never merged away.

    Returns one :data:`Move` per merge; the sources are dead afterwards. This batch's
    surviving births stay young for the namespace's next ``cfg.young_steps`` log steps.
    """
    lineage = stats.lineage
    fresh_docs = stats.fresh[assign]
    now = np.unique(assign[fresh_docs])
    kind_of = merge_candidates(stats, now, cfg.young_steps)
    young = np.flatnonzero(kind_of >= 0)
    if young.shape[0] == 0:
        return absorb_into_known(batch, assign, stats, [], cfg, log_alpha, pinned)
    scan = scan_words(stats, young, batch.words[np.repeat(fresh_docs, np.diff(batch.ptr))])
    kmax = stats.kmax
    gains = np.empty((young.shape[0], kmax))
    n_live = int(stats.alive[:kmax].sum())
    # PY partition prior: merging K clusters into K−1 divides by θ + (K−1)d
    log_new = math.log(math.exp(log_alpha) + cfg.discount * (n_live - 1))
    # under the "births" scope only candidates can be partners: the kernel skips the others
    partners = stats.alive if cfg.merge_scope == "all" else stats.alive[:kmax] & (kind_of >= 0)
    kern.merge_gains(
        young, scan, stats.m, stats.ntok, partners, stats.head, stats.nxt, stats.pk,
        stats.pc, kmax, stats.scale, cfg.beta, batch.n_words * cfg.beta, log_new,
        cfg.discount, gains,
    )  # fmt: skip
    gains[~allowed_pairs(young, kind_of, stats.uid, cfg.merge_scope)] = -np.inf
    moves: list[Move] = []
    for src, dst in greedy_merges(gains, young, kind_of, stats, pinned):
        m_raw, n_raw, moved_w, moved_c = move_counts(stats, src, dst)
        stats.retire(np.array([src], dtype=np.int64))
        stats.fresh[src] = False
        assign[assign == src] = dst
        lineage.record(int(stats.uid[src]), int(stats.uid[dst]), int(stats.ictl[kern.STEPS]))
        moves.append((src, dst, m_raw, n_raw, moved_w, moved_c))
    if cfg.young_steps > 0:
        step = int(stats.ictl[kern.STEPS])
        for k in now.tolist():
            if stats.alive[k]:
                lineage.add_young(int(stats.uid[k]), step)
    return absorb_into_known(batch, assign, stats, moves, cfg, log_alpha, pinned)


def absorb_into_known(
    batch: DocBatch,
    assign: np.ndarray,
    stats: MultinomialStats,
    moves: list[Move],
    cfg: DPMMConfig,
    log_alpha: float,
    pinned: Collection[int],
) -> list[Move]:
    """With known categories (``use_labels``, the ``pinned`` clusters): merge other clusters
    into the known categories this batch seated documents in, when the collapsed posterior
    favours it by more than ``absorb_margin`` (log-odds). A story whose first documents came
    unlabelled opens a novel cluster; once its labelled documents reach the known category,
    the twin is absorbed, so later documents find one cluster. The margin is asymmetric on
    purpose: absorbing a truly new story into a known category hides it (measured on news /
    news-t with ``--known-fraction 0.4``: margin 0 lowers known_f1, 5–60 all raise it)."""
    if not pinned:
        return moves
    kmax = stats.kmax
    is_known = np.isin(stats.uid[:kmax], np.fromiter(pinned, dtype=np.int64))
    is_known &= stats.alive[:kmax]
    touched = np.unique(assign)
    touched = touched[is_known[touched]]
    if touched.shape[0] == 0:
        return moves
    n_live = int(stats.alive[:kmax].sum())
    log_new = math.log(math.exp(log_alpha) + cfg.discount * (n_live - 1))
    scan = np.arange(min(stats.head.shape[0], batch.vocab_size), dtype=np.int64)
    eligible = stats.alive[:kmax] & ~is_known
    gains = absorption_gains(
        stats, touched, eligible, scan, cfg.beta, batch.n_words * cfg.beta, log_new, cfg.discount
    )
    taken = {int(s) for s, *_ in moves}
    for src, dst in greedy_absorptions(gains, touched, cfg.absorb_margin, taken):
        m_raw, n_raw, moved_w, moved_c = move_counts(stats, src, dst)
        stats.retire(np.array([src], dtype=np.int64))
        stats.fresh[src] = False
        assign[assign == src] = dst
        stats.lineage.record(int(stats.uid[src]), int(stats.uid[dst]), int(stats.ictl[kern.STEPS]))
        moves.append((src, dst, m_raw, n_raw, moved_w, moved_c))
    return moves
