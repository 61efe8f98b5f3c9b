"""Known categories under the hybrid likelihood: another cluster absorbed into a known category
when the collapsed posterior of both views, and of which documents carry a label, favours it by
more than ``absorb_margin``."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection

import numpy as np

from noveld.models.dpmm import move_counts
from noveld.models.dpmm.config import DPMMConfig
from noveld.models.dpmm.merges import absorption_gains, greedy_absorptions
from noveld.models.suffstats import MultinomialStats

VectorGains = Callable[[MultinomialStats, np.ndarray], np.ndarray]


def absorb_into_known(
    stats: MultinomialStats,
    seated: np.ndarray,
    pinned: Collection[int],
    reserved: np.ndarray,
    vocab_size: int,
    n_words: int,
    cfg: DPMMConfig,
    log_alpha: float,
    weight: float,
    vector_gains: VectorGains,
    taken: set[int],
    labels: tuple[float, float] = (0.0, 0.0),
) -> list[tuple[int, int]]:
    """Merge clusters into the known categories (``pinned`` uids) that the batch seated
    documents in (``seated``: slots), as the words model does (its
    :func:`~noveld.models.dpmm.merges.absorb_into_known`), on the words' merge gain over every
    real word (``reserved`` dimension ids excluded; ``n_words``: V of the prior) + ``weight``
    × the vectors' merge gain + the labels' evidence (:func:`hidden_label_gains`: ``labels`` is
    the batch's labelled and unlabelled documents seated in known categories).
    ``taken`` slots (merged already) are not absorbed. Applied to ``stats``; returns
    (source uid, known uid) pairs."""
    if not pinned:
        return []
    kmax = stats.kmax
    is_known = np.isin(stats.uid[:kmax], np.fromiter(pinned, dtype=np.int64))
    is_known &= stats.alive[:kmax]
    touched = np.unique(seated)
    touched = touched[is_known[touched]]
    if touched.shape[0] == 0:
        return []
    n_live = int(stats.alive[:kmax].sum())
    log_new = math.log(math.exp(log_alpha) + cfg.discount * (n_live - 1))
    scan = np.arange(min(stats.head.shape[0], vocab_size), dtype=np.int64)
    scan = scan[~np.isin(scan, reserved)]
    eligible = stats.alive[:kmax] & ~is_known
    gains = absorption_gains(
        stats, touched, eligible, scan, cfg.beta, n_words * cfg.beta, log_new, cfg.discount
    )
    if weight:
        gains += weight * vector_gains(stats, touched)
    gains += hidden_label_gains(stats.m[:kmax] * stats.scale, *labels)[None, :]
    pairs: list[tuple[int, int]] = []
    for src, dst in greedy_absorptions(gains, touched, cfg.absorb_margin, set(taken)):
        move_counts(stats, src, dst)
        stats.retire(np.array([src], dtype=np.int64))
        stats.fresh[src] = False
        pairs.append((int(stats.uid[src]), int(stats.uid[dst])))
    return pairs


def hidden_label_gains(mass: np.ndarray, labelled: float, hidden: float) -> np.ndarray:
    """The log-odds the missing labels add to absorbing each cluster (of ``mass`` documents,
    none labelled) into a known category.

    A known category's documents keep their label with an unknown probability f (Beta(1, 1)
    prior); a novel cluster's never do. So n unlabelled documents are (1 − f)^n times as
    probable in a known category as in a cluster of their own; with f integrated against the
    batch's ``labelled`` and ``hidden`` (unlabelled) documents seated in known categories, the
    log-odds are log B(1 + L, 1 + U + n) − log B(1 + L, 1 + U) ≤ 0: a large cluster in which no
    document carries a label is unlikely to belong to a category whose documents do."""
    a, b = 1.0 + labelled, 1.0 + hidden
    const = math.lgamma(a + b) - math.lgamma(b)
    return np.array(
        [math.lgamma(b + n) - math.lgamma(a + b + n) + const for n in np.maximum(mass, 0.0)],
        dtype=np.float64,
    )


def batch_label_counts(
    uids: np.ndarray, forced: np.ndarray, pinned: Collection[int]
) -> tuple[float, float]:
    """L and U of the batch: its labelled documents (``forced`` ≥ 0), and its unlabelled ones
    seated in known categories (``pinned`` uids)."""
    free = forced < 0
    hidden = float(np.isin(uids[free], np.fromiter(pinned, dtype=np.int64)).sum())
    return float((~free).sum()), hidden


def seated_after_merges(
    stats: MultinomialStats, uids: np.ndarray, merged: list[tuple[int, int]]
) -> tuple[np.ndarray, set[int]]:
    """The slots the batch's documents sit in once this batch's ``merged`` (uid, into) pairs
    are applied, and the slots merged into (no absorption takes them)."""
    survivor = dict(merged)
    seated = [stats.slot_of(survivor.get(u, u)) for u in np.unique(uids).tolist()]
    taken = {stats.slot_of(d) for _, d in merged}
    return np.array([k for k in seated if k >= 0], dtype=np.int64), taken
