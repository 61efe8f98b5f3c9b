"""Which clusters a batch's merge step tests, and against which: this batch's births and the
clusters any writer opened recently (:mod:`noveld.models.lineage`), and the survivor rule that
lets replicas agree on a merge."""

from __future__ import annotations

from collections.abc import Collection

import numpy as np

from noveld.models.kernels import multinomial as kern
from noveld.models.lineage import UID_SLOT_BITS
from noveld.models.suffstats import MultinomialStats

NOW, FOREIGN, RECENT = 0, 1, 2
"""Kinds of merge candidates: born in this batch, opened by another writer (another uid slot),
opened by this writer in an earlier batch."""


def merge_candidates(stats: MultinomialStats, now: np.ndarray, horizon: int) -> np.ndarray:
    """The kind of every slot (−1: not a candidate): this batch's births ``now`` and the live
    clusters of any writer born within the namespace's last ``horizon`` log steps (only when
    they span two uid slots or more: births of one slot merge only within their batch) — a
    pure function of the statistics, so a restarted writer merges as a clean one does.
    Ownership is by uid slot: the clusters of the slots of the input partitions this writer holds
    (:attr:`Lineage.own_slots`; else of the slot this batch's uids come from) are its own."""
    young = stats.lineage.current(horizon, int(stats.ictl[kern.STEPS]))
    kmax = stats.kmax
    kind_of = np.full(kmax, -1, dtype=np.int64)
    if young:
        uids = stats.uid[:kmax]
        is_young = np.isin(uids, np.fromiter(young, dtype=np.int64)) & stats.alive[:kmax]
        slots = stats.lineage.own_slots
        if slots is None:
            slots = frozenset({int(stats.ictl[kern.NEXT_UID]) >> UID_SLOT_BITS})
        own = np.isin(uids >> UID_SLOT_BITS, np.fromiter(slots, dtype=np.int64))
        kind_of[is_young] = np.where(own[is_young], RECENT, FOREIGN)
        among = (kind_of >= 0) | np.isin(np.arange(kmax), now)
        if np.unique(uids[among] >> UID_SLOT_BITS).shape[0] < 2:
            kind_of[:] = -1  # births of one slot merge only within their batch
    kind_of[now] = NOW
    return kind_of


def allowed_pairs(rows: np.ndarray, kind_of: np.ndarray, uid: np.ndarray, scope: str) -> np.ndarray:
    """``ok[i, k]``: may candidate ``rows[i]`` merge with slot k? With any other candidate
    (``kind_of`` ≥ 0; under ``scope`` "all" with any older cluster too) of another uid slot,
    or of this batch when it is one itself — as long as the cluster :func:`survivor` merges
    away is this writer's own: only the writer that opened a cluster decides to merge it away, so no
    cluster is merged into two different survivors by two replicas at once (their union would
    join two stories)."""
    ok: np.ndarray = np.repeat((kind_of >= 0)[None, :], rows.shape[0], axis=0)
    if scope == "all":
        ok[:] = True
    ok[np.arange(rows.shape[0]), rows] = False
    row_kind, col_kind = kind_of[rows][:, None], kind_of[None, :]
    row_away = uid[rows][:, None] > uid[None, : kind_of.shape[0]]
    away_kind = np.where(row_away, row_kind, col_kind)
    both = (row_kind >= 0) & (col_kind >= 0)
    ok &= ~((away_kind == FOREIGN) & both)
    # two births of one uid slot (one partition's writer) merge only within their batch, so a
    # lone writer merges exactly as it would without replicas
    slot = uid[: kind_of.shape[0]] >> UID_SLOT_BITS
    same = (slot[rows][:, None] == slot[None, :]) & both
    ok &= ~(same & ~((row_kind == NOW) & (col_kind == NOW)))
    return ok


def survivor(stats: MultinomialStats, a: int, b: int, kind_a: int, kind_b: int) -> tuple[int, int]:
    """(merged-away slot, survivor slot) of candidates ``a`` and ``b``: two births of this
    batch keep the heavier one (the lower uid when tied); any other pair of candidates the
    lower uid, so every replica that decides the merge makes the same move."""
    if kind_a >= 0 and kind_b >= 0 and (kind_a, kind_b) != (NOW, NOW):
        return (a, b) if stats.uid[a] > stats.uid[b] else (b, a)
    heavier_b = (stats.m[a], -stats.uid[a]) <= (stats.m[b], -stats.uid[b])
    return (a, b) if heavier_b else (b, a)


def greedy_merges(
    gains: np.ndarray,
    rows: np.ndarray,
    kind_of: np.ndarray,
    stats: MultinomialStats,
    keep: Collection[int],
) -> list[tuple[int, int]]:
    """(merged-away slot, survivor slot) of the merges ``gains[i, k] > 0`` of candidate
    ``rows[i]`` with slot k: each row's best partner, best gain first, each cluster in one
    merge at most, the pair ordered by :func:`survivor`; a pair that would merge away a
    cluster that is no candidate, or one of the uids ``keep``, is passed over. The moves do not
    change the choice (no cluster is in two), so the caller applies them afterwards."""
    n = rows.shape[0]
    best = gains.argmax(axis=1)
    order = np.argsort(-gains[np.arange(n), best], kind="stable")
    used: set[int] = set()
    out: list[tuple[int, int]] = []
    for i in order.tolist():
        y, k = int(rows[i]), int(best[i])
        if gains[i, k] <= 0.0:
            break
        if y in used or k in used:
            continue
        src, dst = survivor(stats, y, k, int(kind_of[y]), int(kind_of[k]))
        if kind_of[src] < 0 or int(stats.uid[src]) in keep:
            continue  # an older cluster is never merged away into a birth
        out.append((src, dst))
        used.update((y, k))
    return out


def scan_words(stats: MultinomialStats, slots: np.ndarray, batch_words: np.ndarray) -> np.ndarray:
    """The words a merge test of ``slots`` has to look at: the batch's births' words and every
    word of the older candidates (a word only one side holds does not change the gain)."""
    older = np.zeros(stats.kmax, dtype=np.bool_)
    older[slots] = True
    older &= ~stats.fresh[: stats.kmax]
    if not older.any():
        return np.unique(batch_words.astype(np.int64))
    held = kern.words_of_clusters(older, stats.head, stats.nxt, stats.pk, stats.pc)
    return np.union1d(batch_words.astype(np.int64), held)
