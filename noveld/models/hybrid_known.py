"""Known categories under the hybrid likelihood: another cluster absorbed into a known category
when the collapsed posterior of both views favours it by more than ``absorb_margin``."""

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
) -> list[tuple[int, int]]:
    """Merge clusters into the known categories (``pinned`` uids) that the batch seated
    documents in (``seated``: slots), as the words model does (its
    :func:`~noveld.models.dpmm.merges.absorb_into_known`), on the words' merge gain over every
    real word (``reserved`` dimension ids excluded; ``n_words``: V of the prior) + ``weight``
    × the vectors' merge gain.
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
    pairs: list[tuple[int, int]] = []
    for src, dst in greedy_absorptions(gains, touched, cfg.absorb_margin, set(taken)):
        move_counts(stats, src, dst)
        stats.retire(np.array([src], dtype=np.int64))
        stats.fresh[src] = False
        pairs.append((int(stats.uid[src]), int(stats.uid[dst])))
    return pairs
