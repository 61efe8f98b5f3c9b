"""Which clusters a batch's merge step tests, and against which: this batch's births, the young
clusters of other writers and this writer's own recent births (:mod:`noveld.models.lineage`),
and the survivor rule that lets replicas agree on a merge."""

from __future__ import annotations

import numpy as np

from noveld.models.kernels import multinomial as kern
from noveld.models.suffstats import MultinomialStats

NOW, FOREIGN, RECENT = 0, 1, 2
"""Kinds of merge candidates: born in this batch, born by another writer, born by this writer
in one of its last batches."""


def merge_candidates(
    stats: MultinomialStats, now: np.ndarray, horizon: int
) -> tuple[np.ndarray, np.ndarray]:
    """(slots, kinds) of the clusters the merge step tests: this batch's births ``now``, other
    writers' births of this writer's last ``horizon`` batches and, when there are any, this
    writer's own births of those batches (tested against the foreign ones only)."""
    young = stats.lineage.current(horizon)
    slot_of = {int(u): k for k, u in enumerate(stats.uid[: stats.kmax].tolist()) if stats.alive[k]}
    foreign = sorted(slot_of[u] for u, y in young.items() if y.foreign and u in slot_of)
    recent = sorted(slot_of[u] for u, y in young.items() if not y.foreign and u in slot_of)
    if not foreign:
        recent = []
    slots = np.array([*now.tolist(), *foreign, *recent], dtype=np.int64)
    kinds = np.array([NOW] * now.shape[0] + [FOREIGN] * len(foreign) + [RECENT] * len(recent))
    return slots, kinds.astype(np.int64)


def allowed_pairs(slots: np.ndarray, kinds: np.ndarray, kmax: int, scope: str) -> np.ndarray:
    """``ok[i, k]``: may candidate ``slots[i]`` merge with slot k? Births of this batch with
    each other and with foreign births; foreign births with every candidate; own recent births
    with foreign ones only (so a lone writer merges exactly as before). Under ``scope`` "all"
    births of this batch and foreign ones may also merge with any older cluster."""
    kind_of = np.full(kmax, -1, dtype=np.int64)
    kind_of[slots] = kinds
    col = kind_of[None, :]
    row = kinds[:, None]
    ok: np.ndarray = ((row == NOW) & ((col == NOW) | (col == FOREIGN))) | (
        (row == FOREIGN) & (col >= 0)
    )
    ok |= (row == RECENT) & (col == FOREIGN)
    if scope == "all":
        ok |= (row != RECENT) & (col < 0)
    ok[np.arange(slots.shape[0]), slots] = False
    return ok


def survivor(stats: MultinomialStats, a: int, b: int, kind_a: int, kind_b: int) -> tuple[int, int]:
    """(merged-away slot, survivor slot) of candidates ``a`` and ``b``: between clusters of
    different writers (one of them foreign) the lower uid survives, so every replica that
    decides this merge makes the same move; otherwise the heavier one (the lower uid when
    tied)."""
    if FOREIGN in (kind_a, kind_b) and kind_a >= 0 and kind_b >= 0:
        return (a, b) if stats.uid[a] > stats.uid[b] else (b, a)
    heavier_b = (stats.m[a], -stats.uid[a]) <= (stats.m[b], -stats.uid[b])
    return (a, b) if heavier_b else (b, a)


def scan_words(stats: MultinomialStats, slots: np.ndarray, batch_words: np.ndarray) -> np.ndarray:
    """The words a merge test of ``slots`` has to look at: the batch's births' words and every
    word of the older candidates (a word only one side holds does not change the gain)."""
    parts = [batch_words.astype(np.int64)]
    for k in slots.tolist():
        if not stats.fresh[k]:
            w, _ = kern.cluster_word_counts(k, stats.head, stats.nxt, stats.pk, stats.pc)
            parts.append(w.astype(np.int64))
    return np.unique(np.concatenate(parts))
