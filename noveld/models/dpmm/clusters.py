"""Slot-level changes to the cluster pool shared by seating, merges and replay: opening the
known-label clusters a batch names, and moving one cluster's counts into another."""

from __future__ import annotations

import numpy as np

from noveld.models.kernels import multinomial as kern
from noveld.models.suffstats import MultinomialStats

Move = tuple[int, int, float, float, np.ndarray, np.ndarray]
"""One merge: (source slot, survivor slot, moved raw mass, moved raw tokens, moved word ids,
moved raw counts)."""


def move_counts(
    stats: MultinomialStats, src: int, dst: int
) -> tuple[float, float, np.ndarray, np.ndarray]:
    """Merge slot ``src`` into ``dst`` (every count moves; ``src`` is left empty, not retired).
    Returns the moved raw mass, raw tokens, word ids and raw counts."""
    words, _ = kern.cluster_word_counts(src, stats.head, stats.nxt, stats.pk, stats.pc)
    words = np.sort(words.astype(np.int64))
    stats.reserve(0, words.shape[0], int(words.max()) + 1 if words.shape[0] else 0)
    m_raw, n_raw = float(stats.m[src]), float(stats.ntok[src])
    out_w = np.empty(words.shape[0], dtype=np.int64)
    out_c = np.empty(words.shape[0])
    n = kern.move_cluster(
        src, dst, stats.m, stats.ntok, stats.head, stats.nxt, stats.pk, stats.pc, stats.ictl,
        words, out_w, out_c,
    )  # fmt: skip
    return m_raw, n_raw, out_w[:n].copy(), out_c[:n].copy()


def ensure_clusters(stats: MultinomialStats, known: np.ndarray | None, n: int) -> np.ndarray:
    """Slots of the known-label clusters ``known`` (uid per document, −1 = none), opening the
    missing ones empty (they are categories, not births); −1 where no label is known."""
    forced = np.full(n, -1, dtype=np.int64)
    if known is None or not np.any(known >= 0):
        return forced
    kmax = stats.kmax
    slot_of = {int(u): k for k, u in enumerate(stats.uid[:kmax].tolist()) if stats.alive[k]}
    wanted = [u for u in dict.fromkeys(known[known >= 0].tolist()) if u not in slot_of]
    stats.reserve(len(wanted), 0, 0)
    next_uid = int(stats.ictl[kern.NEXT_UID])
    for u in wanted:
        stats.ictl[kern.NEXT_UID] = u
        k = kern.open_cluster(stats.alive, stats.uid, stats.fresh, stats.free_stack, stats.ictl)
        stats.fresh[k] = False
        stats.m[k] = stats.ntok[k] = 0.0
        slot_of[u] = k
    stats.ictl[kern.NEXT_UID] = next_uid
    for d in np.flatnonzero(known >= 0).tolist():
        forced[d] = slot_of[int(known[d])]
    return forced
