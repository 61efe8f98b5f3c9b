"""Model-facing value types shared by every inference engine: batches in, results out."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from noveld.models.suffstats import MultinomialStats


@dataclass(frozen=True)
class DocBatch:
    """A featurized mini-batch in CSR form: document ``d`` has unique word ids
    ``words[ptr[d]:ptr[d+1]]`` with their in-document ``counts``; ``lengths`` are token counts.
    ``vocab_size`` is the vocabulary size after featurizing the batch; ``reserved`` of those
    entries are not words (hdp topics, context values); ``dropped`` words were seen once but
    compacted out of the id space since (no live cluster counted them): they are not ids any
    more but still words of the prior, so V in Vβ is ``vocab_size + dropped - reserved``.

    Optional categorical context (used by ``hdp``): document d's fields are entries
    ``ctx_ptr[d]:ctx_ptr[d+1]`` of ``ctx_value`` (vocabulary id of "field = value"),
    ``ctx_field`` (vocabulary id of the field) and ``ctx_card`` (distinct values of the field
    seen so far).

    ``emb`` holds each document's embedding as a unit vector when the model clusters embeddings.
    """

    ptr: np.ndarray
    words: np.ndarray
    counts: np.ndarray
    lengths: np.ndarray
    vocab_size: int
    reserved: int = 0
    dropped: int = 0
    ctx_ptr: np.ndarray | None = None
    ctx_value: np.ndarray | None = None
    ctx_field: np.ndarray | None = None
    ctx_card: np.ndarray | None = None
    emb: np.ndarray | None = None  # (documents × p) unit embeddings, for the vmf likelihood

    def __len__(self) -> int:
        return int(self.lengths.shape[0])

    @property
    def n_words(self) -> int:
        """V: the words of the prior, every word ever seen (ids now, or compacted out)."""
        return max(self.vocab_size + self.dropped - self.reserved, 1)

    @property
    def nnz(self) -> int:
        """Number of (document, word) pairs."""
        return int(self.words.shape[0])

    def doc(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        """(word ids, counts) of document ``d``."""
        s, e = int(self.ptr[d]), int(self.ptr[d + 1])
        return self.words[s:e], self.counts[s:e]

    @classmethod
    def from_docs(cls, docs: list[list[int]], vocab_size: int) -> DocBatch:
        """Build from token-id lists (repeated ids are counted)."""
        ptr = np.zeros(len(docs) + 1, dtype=np.int64)
        ws: list[np.ndarray] = []
        cs: list[np.ndarray] = []
        for i, ids in enumerate(docs):
            u, c = np.unique(np.asarray(ids, dtype=np.int64), return_counts=True)
            ws.append(u)
            cs.append(c.astype(np.int64))
            ptr[i + 1] = ptr[i] + u.shape[0]
        words = np.concatenate(ws) if ws else np.zeros(0, dtype=np.int64)
        counts = np.concatenate(cs) if cs else np.zeros(0, dtype=np.int64)
        lengths = np.array([len(d) for d in docs], dtype=np.int64)
        return cls(ptr, words, counts, lengths, vocab_size)


@dataclass(frozen=True)
class StatsDelta:
    """The change one batch made to the statistics, in true (decayed) units.

    Applying it: multiply every statistic by ``decay``; add ``dm``/``dntok`` to the clusters
    ``cluster_uids`` (creating those in ``born_uids``); add ``word_count`` to the cluster–word
    pairs (``word_cluster`` indexes ``cluster_uids``); move every count of each ``merges`` source
    into its survivor; then drop ``retired_uids``. Count
    statistics commute, so replicas can apply each other's deltas.
    """

    decay: float
    cluster_uids: np.ndarray
    dm: np.ndarray
    dntok: np.ndarray
    word_cluster: np.ndarray
    word_ids: np.ndarray
    word_count: np.ndarray
    born_uids: np.ndarray
    retired_uids: np.ndarray
    n_docs: int = -1  # documents in the batch; -1: Σ dm (true for count models, not for SVI)
    # (source uid, survivor uid) per merge, applied after the additions and before retirement;
    # the sources are also in ``retired_uids``
    merges: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), dtype=np.int64))

    def documents(self) -> int:
        """How many documents the batch had."""
        return self.n_docs if self.n_docs >= 0 else round(float(self.dm.sum()))


@dataclass(frozen=True)
class BatchResult:
    """What a model step produced: per-document cluster uids, births and the statistics delta.

    ``born`` lists (cluster uid, index of the founding document in the batch, novelty score).
    ``retired`` lists (uid, remaining mass, "faded" | "evicted") of clusters retired in this step.
    ``merged`` lists (uid, surviving uid, whether the merged cluster was born in this step) of
    clusters merged into another in this step; the assignments already name the survivor.
    """

    assignments: np.ndarray
    born: list[tuple[int, int, float]]
    retired: list[tuple[int, float, str]]
    delta: StatsDelta
    log_predictive_per_token: float = float("nan")
    extra: dict[str, float] = field(default_factory=dict)
    merged: list[tuple[int, int, bool]] = field(default_factory=list)


#: ``fits(uid, words, counts)``: does a member still belong to cluster ``uid`` (re-founding)?
FitTest = Callable[[int, np.ndarray, np.ndarray], bool]


class ClusterModel(Protocol):
    """What the pipeline needs of an inference engine (``dpmm``, ``svi``, ``hdp``)."""

    kind: str
    #: ids of the vocabulary entries whose counts are not tokens (pruning leaves ``ntok``
    #: alone for them); the pipeline binds it to its vocabulary
    uncounted_words: Callable[[], np.ndarray]

    def new_state(self) -> MultinomialStats:
        """Empty statistics."""
        ...

    def partial_fit(
        self,
        batch: DocBatch,
        stats: MultinomialStats,
        rng: np.random.Generator,
        known: np.ndarray | None = None,
        pinned: Collection[int] = (),
    ) -> BatchResult:
        """One mini-batch: assignments, births, retirements and the statistics delta."""
        ...

    def term_weights(self, stats: MultinomialStats, uid: int) -> tuple[np.ndarray, np.ndarray]:
        """(word ids, weights) describing cluster ``uid``, for top terms."""
        ...

    def refound_test(self, stats: MultinomialStats, batch: DocBatch) -> FitTest:
        """The novelty tracker's re-founding question for this batch: ``fits(uid, words,
        counts)`` — would that member of cluster ``uid`` be seated there again, taken out?"""
        ...
