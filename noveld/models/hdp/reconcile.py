"""Cross-replica reconciliation of the ``hdp`` model: a category this writer opened, in this
batch or recently, merged with another writer's young category of the same story.

The batch kernel (:func:`~noveld.models.kernels.hdp_moves.merge_births`) merges the batch's
own births on their tokens; another writer's births are in the pool only as counts, so this
step tests them on each category's expected word counts, as known-label absorption does
(:func:`~noveld.models.hdp.absorb.expected_word_stats`). Which pairs are tested and which
category survives follow ``dpmm``'s rules (:mod:`noveld.models.dpmm.reconcile`): the lower uid
survives, and only the writer that opened a category merges it away.
"""

from __future__ import annotations

import math
from collections.abc import Collection

import numpy as np

from noveld.models.dpmm.merges import absorption_gains
from noveld.models.dpmm.reconcile import (
    NOW,
    allowed_pairs,
    greedy_merges,
    merge_candidates,
)
from noveld.models.hdp.absorb import expected_word_stats
from noveld.models.hdp.topics import is_topic
from noveld.models.hdp.vectors import CategoryVectors
from noveld.models.lineage import UID_SLOT_BITS
from noveld.models.suffstats import MultinomialStats


def reconcile_births(
    stats: MultinomialStats,
    born: Collection[int],
    pinned: Collection[int],
    gamma: float,
    fading: Collection[int],
    vocab_size: int,
    beta: float,
    vbeta: float,
    discount: float,
    young_steps: int,
    topic_words: np.ndarray,
    vectors: CategoryVectors | None = None,
) -> list[tuple[int, int]]:
    """(merged-away uid, survivor uid) pairs: this writer's young categories (the uids
    ``born`` in this batch and its births of the namespace's last ``young_steps`` log steps)
    merged with young ones of another uid slot (another writer's, or this writer's from
    batches of its other input partitions) when the collapsed posterior of their expected
    word counts rises (:func:`~noveld.models.kernels.multinomial.merge_gains`, the tables'
    Pitman–Yor prior with concentration ``gamma``); greedy, best gain first, each category in
    one merge at most; with ``vectors``, plus the vector view's gain
    (:meth:`CategoryVectors.merge_gains`). ``pinned`` (known) and ``fading`` (retired by this
    batch) categories are never merged.

    Empty while every young category is of one slot: pairs of a batch's own births were
    decided by the batch kernel, so a writer of one input merges exactly as without
    reconciliation. Read-only; the caller applies the merges through the delta, as a replica
    replays them."""
    kmax = stats.kmax
    uids = stats.uid[:kmax]
    category = stats.alive[:kmax] & ~is_topic(uids)
    slot_of = {int(u): k for k, u in enumerate(uids.tolist()) if category[k]}
    now = np.array(sorted(slot_of[u] for u in born if u in slot_of), dtype=np.int64)
    kind_of = merge_candidates(stats, now, young_steps)
    kind_of[~category] = -1
    if pinned:  # known categories belong to no writer
        kind_of[np.isin(uids, np.fromiter(pinned, dtype=np.int64))] = -1
    if np.unique(uids[kind_of >= 0] >> UID_SLOT_BITS).shape[0] < 2:
        return []  # one slot's births only: the kernel's
    cats = np.flatnonzero(kind_of >= 0)  # row j of the expected counts is slot cats[j]
    kinds = kind_of[cats]
    expected = expected_word_stats(stats, kind_of >= 0, vocab_size, topic_words)
    n_live = int(category.sum())
    log_new = math.log(gamma + discount * (n_live - 1))
    rows = np.arange(cats.shape[0], dtype=np.int64)
    gains = absorption_gains(
        expected, rows, np.ones(cats.shape[0], dtype=np.bool_),
        np.arange(vocab_size, dtype=np.int64), beta, vbeta, log_new, discount,
    )  # fmt: skip
    if vectors is not None:
        gains += vectors.merge_gains(stats, cats, rows)
    gains[~allowed_pairs(rows, kinds, uids[cats], "births")] = -np.inf
    gains[(kinds == NOW)[:, None] & (kinds == NOW)[None, :]] = -np.inf  # the kernel's
    gone = np.isin(uids[cats], np.fromiter(fading, dtype=np.int64))
    gains[gone] = -np.inf
    gains[:, gone] = -np.inf
    by_slot = np.full((cats.shape[0], kmax), -np.inf)  # columns: pool slots
    by_slot[:, cats] = gains
    pairs = greedy_merges(by_slot, cats, kind_of, stats, ())
    return [(int(uids[src]), int(uids[dst])) for src, dst in pairs]
