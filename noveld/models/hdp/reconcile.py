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
    FOREIGN,
    NOW,
    allowed_pairs,
    merge_candidates,
    survivor,
)
from noveld.models.hdp.absorb import expected_word_stats
from noveld.models.hdp.topics import is_topic
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
    young_docs: int,
    topic_words: np.ndarray,
) -> list[tuple[int, int]]:
    """(merged-away uid, survivor uid) pairs: this writer's young categories (the uids
    ``born`` in this batch and its births of the namespace's last ``young_docs`` documents)
    merged with another writer's young ones when the collapsed posterior of their expected
    word counts rises (:func:`~noveld.models.kernels.multinomial.merge_gains`, the tables'
    Pitman–Yor prior with concentration ``gamma``); greedy, best gain first, each category in
    one merge at most. ``pinned`` (known) and ``fading`` (retired by this batch) categories
    are never merged.

    Empty unless another writer's category is young: pairs of this writer's own births were
    decided by the batch kernel, so a lone writer merges exactly as without replicas. Read-only;
    the caller applies the merges through the delta, as a replica replays them."""
    kmax = stats.kmax
    uids = stats.uid[:kmax]
    category = stats.alive[:kmax] & ~is_topic(uids)
    slot_of = {int(u): k for k, u in enumerate(uids.tolist()) if category[k]}
    now = np.array(sorted(slot_of[u] for u in born if u in slot_of), dtype=np.int64)
    kind_of = merge_candidates(stats, now, young_docs)
    kind_of[~category] = -1
    if pinned:  # known categories belong to no writer
        kind_of[np.isin(uids, np.fromiter(pinned, dtype=np.int64))] = -1
    if not np.any(kind_of == FOREIGN):
        return []
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
    gains[~allowed_pairs(rows, kinds, uids[cats], "births")] = -np.inf
    gains[(kinds == NOW)[:, None] & (kinds == NOW)[None, :]] = -np.inf  # the kernel's
    keep = set(fading)
    best = gains.argmax(axis=1)
    order = np.argsort(-gains[rows, best], kind="stable")
    used: set[int] = set()
    out: list[tuple[int, int]] = []
    for i in order.tolist():
        j = int(best[i])
        if gains[i, j] <= 0.0:
            break
        if i in used or j in used:
            continue
        src, dst = survivor(stats, int(cats[i]), int(cats[j]), int(kinds[i]), int(kinds[j]))
        if int(uids[src]) in keep or int(uids[dst]) in keep:
            continue
        out.append((int(uids[src]), int(uids[dst])))
        used.update((i, j))
    return out
