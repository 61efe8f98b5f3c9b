"""The hybrid model's index of its dimension entries (:mod:`noveld.models.kernels.
dimension_index`), kept in step with one statistics object: what lets the seating read the
resultants, and the batch's additions write them, without walking the dimensions' lists."""

from __future__ import annotations

import numpy as np

from noveld.models.kernels import dimension_index as dkern
from noveld.models.kernels import multinomial as kern
from noveld.models.suffstats import MultinomialStats


class DimensionIndex:
    """``idx[c, k]``: the postings entry of slot k on dimension word ``dim_words[c]`` (the
    positive ids, then the negative), −1 for none; synced before each use with the entries
    allocated since, rebuilt when the statistics object or its compaction count changes."""

    def __init__(self, pos: np.ndarray, neg: np.ndarray) -> None:
        self._p = int(pos.shape[0])
        self._dim_words = np.concatenate([pos, neg]).astype(np.int64)
        self._col_of = np.full(int(self._dim_words.max()) + 1, -1, dtype=np.int64)
        self._col_of[self._dim_words] = np.arange(self._dim_words.shape[0])
        self._stats: MultinomialStats | None = None
        self._compactions = -1
        self._used = 0
        self._idx = np.full((self._dim_words.shape[0], 0), -1, dtype=np.int64)

    def synced(self, stats: MultinomialStats) -> np.ndarray:
        """The index, up to date with ``stats``' pool (a column per slot of its capacity)."""
        rows = max(stats.m.shape[0], stats.kmax)
        if stats is not self._stats or stats.compactions != self._compactions:
            self._stats, self._compactions, self._used = stats, stats.compactions, 0
            self._idx = np.full((self._dim_words.shape[0], rows), -1, dtype=np.int64)
        elif rows > self._idx.shape[1]:
            grown = np.full((self._idx.shape[0], 2 * rows), -1, dtype=np.int64)
            grown[:, : self._idx.shape[1]] = self._idx
            self._idx = grown
        dkern.sync_index(self._idx, self._dim_words, stats.head, stats.nxt, stats.pk, self._used)
        self._used = int(stats.ictl[kern.POOL_USED])
        return self._idx

    def add_counts(
        self, stats: MultinomialStats, slots: np.ndarray, words: np.ndarray, raw: np.ndarray
    ) -> None:
        """:func:`~noveld.models.dpmm.replay.add_counts`, the same pool, through the index."""
        idx = self.synced(stats)
        dkern.add_word_counts_indexed(
            slots, words, raw, stats.head, stats.nxt, stats.pk, stats.pc, stats.ictl,
            self._col_of, idx,
        )  # fmt: skip
        self._used = int(stats.ictl[kern.POOL_USED])

    def resultants(self, stats: MultinomialStats, scale: float) -> np.ndarray:
        """The (kmax × p) resultants × ``scale`` (column-major), as
        :meth:`~noveld.models.hybrid.HybridMixture.resultants` gathers them."""
        idx = self.synced(stats)
        out = np.empty((self._p, stats.kmax))
        dkern.gather_resultants_indexed(idx, stats.pc, self._p, stats.kmax, scale, out)
        return out.T
