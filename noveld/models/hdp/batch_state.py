"""The statistics one ``hdp`` batch samples against, densified from the pool with the sparse
indexes the sampler kernels walk."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from noveld.models.base import DocBatch
from noveld.models.hdp.topics import is_topic
from noveld.models.hdp.vectors import CategoryVectors, no_vector_bundle
from noveld.models.kernels import hdp as kern
from noveld.models.kernels import hdp_scores as scores
from noveld.models.kernels import multinomial as mkern
from noveld.models.lineage import UID_SLOT_BITS
from noveld.models.suffstats import MultinomialStats


@dataclass
class BatchState:
    """The statistics one batch samples against, densified: topic–word counts of the batch's
    words with each word's topic list, topic totals, and category–topic counts with room for
    categories the batch opens, with both sparse indexes (layout:
    :mod:`noveld.models.kernels.hdp_scores`). Local categories are ordered by uid (MAP ties:
    the oldest)."""

    tw: tuple[np.ndarray, ...]  # (nlw, nl, inv, Σ inv)
    cat: tuple[np.ndarray, ...]  # (okl, ok, mk, alive, uid)
    ix: tuple[np.ndarray, ...]  # (nz, nzlen, innz, cz, czlen, wz, wz_ptr, wzlen)
    ctl: np.ndarray
    known_local: np.ndarray
    n_existing: int
    #: (ctx_ptr, value column, field column, U, counts, context table, the vector bundle of
    #: :mod:`noveld.models.kernels.hdp_sampler.vectors`)
    cx: tuple[np.ndarray, ...]

    @property
    def uid(self) -> np.ndarray:
        """Local category → uid."""
        return self.cat[4]

    @property
    def mk(self) -> np.ndarray:
        """Tables per local category."""
        return self.cat[2]

    @classmethod
    def gather(
        cls,
        topic_words: np.ndarray,
        stats: MultinomialStats,
        decay: float,
        bwords: np.ndarray,
        word_tokens: np.ndarray,
        known: np.ndarray | None,
        n_topics: int,
        vbeta: float,
        room: int,
        n_docs: int,
        batch: DocBatch,
        topic_offset: int = 0,
        vectors: CategoryVectors | None = None,
    ) -> BatchState:
        """Densify what the batch needs (statistics decayed by ``decay``), with ``room`` more
        categories than exist; ``word_tokens[j]`` is how many tokens batch word j has. The
        categories' counts of the batch's context entries are columns of ``cx[4]``. Local
        topic y is topic ``(y + topic_offset) mod L`` (:func:`topic_offset`). With
        ``vectors``, the categories' resultants and the batch's vectors ride in ``cx[6:]``."""
        g = stats.scale * decay
        kmax = stats.kmax
        uids = stats.uid[:kmax]
        alive = stats.alive[:kmax]
        topic_mask = is_topic(uids)
        topic_of_slot = np.full(kmax, -1, dtype=np.int64)
        topic_slots = np.flatnonzero(alive & topic_mask)
        topic_numbers = ((uids[topic_slots] & ((1 << 40) - 1)) - topic_offset) % n_topics
        topic_words = np.roll(topic_words, -topic_offset)
        topic_of_slot[topic_slots] = topic_numbers
        nl = np.zeros(n_topics)
        nl[topic_numbers] = stats.ntok[topic_slots] * g
        inv = 1.0 / (vbeta + nl)
        cat_slots = np.flatnonzero(alive & ~topic_mask)
        cat_uids = uids[cat_slots].tolist()
        if known is not None:  # known categories not in the pool yet (opened empty)
            cat_uids += sorted({int(u) for u in known[known >= 0].tolist()} - set(cat_uids))
        cat_uids.sort()
        local_of_uid = {u: i for i, u in enumerate(cat_uids)}
        n_existing = len(cat_uids)
        cap = n_existing + room
        cat_of_slot = np.full(kmax, -1, dtype=np.int64)
        rows = np.array([local_of_uid[int(u)] for u in uids[cat_slots].tolist()], dtype=np.int64)
        cat_of_slot[cat_slots] = rows
        nlw = np.zeros((bwords.shape[0], n_topics))
        okl = np.zeros((cap, n_topics))
        ix = kern.gather_indexed(bwords, topic_words, stats.head, stats.nxt, stats.pk, stats.pc,
                                 topic_of_slot, cat_of_slot, g, word_tokens, nlw, okl)  # fmt: skip
        ok = np.zeros(cap)
        mk = np.zeros(cap)
        ok[rows] = stats.ntok[cat_slots] * g
        mk[rows] = stats.m[cat_slots] * g
        cat_alive = np.zeros(cap, dtype=np.bool_)
        cat_alive[:n_existing] = True
        cat_uid = np.full(cap, -1, dtype=np.int64)
        cat_uid[:n_existing] = cat_uids
        known_local = np.full(n_docs, -1, dtype=np.int64)
        if known is not None:
            for d in np.flatnonzero(known >= 0).tolist():
                known_local[d] = local_of_uid[int(known[d])]
        empty = np.flatnonzero(nl < scores.EMPTY_BELOW)
        ctl = np.zeros(scores.CTL_SIZE, dtype=np.int64)
        ctl[scores.CATS] = n_existing
        ctl[scores.NEXT_UID] = int(stats.ictl[mkern.NEXT_UID])
        ctl[scores.N_EMPTY] = empty.shape[0]
        ctl[scores.FIRST_EMPTY] = int(empty[0]) if empty.shape[0] else -1
        return cls(
            (nlw, nl, inv, np.array([inv.sum()])),
            (okl, ok, mk, cat_alive, cat_uid),
            ix,
            ctl,
            known_local,
            n_existing,
            context_counts(batch, stats, g, cat_of_slot, cap, n_docs)
            + (
                no_vector_bundle(cap, n_docs)
                if vectors is None
                else vectors.bundle(stats, g, cat_of_slot, cap, batch.emb, n_docs)
            ),
        )


def topic_offset(next_uid: int, n_topics: int) -> int:
    """Where a writer's batches start looking for unused topics: a rotation of the topic
    numbers by the uid slot s of the batch's writer, ``L · r(s)`` with r the base-2 radical
    inverse (0, 1/2, 1/4, 3/4, 1/8, …: P slots split the topics into P nearly equal stretches,
    equal for P a power of two). Writers opening categories at once then claim different
    topics, so no topic holds two stories' words; a lone writer of slot 0 claims them in
    order."""
    slot, share, unit = next_uid >> UID_SLOT_BITS, 0.0, 0.5
    while slot:
        share += unit * (slot & 1)
        slot, unit = slot >> 1, unit / 2
    return int(n_topics * share) % n_topics


def context_counts(
    batch: DocBatch,
    stats: MultinomialStats,
    scale: float,
    cat_of_slot: np.ndarray,
    cap: int,
    n_docs: int,
) -> tuple[np.ndarray, ...]:
    """The sampler's context bundle: each document's entries as columns of a dense
    (category × the batch's context entries) count matrix, and a slot for the table carrying
    each document's context (the vector bundle follows: :meth:`CategoryVectors.bundle`)."""
    ctx_tab = np.zeros(n_docs, dtype=np.int64)
    if batch.ctx_ptr is None or batch.ctx_value is None or batch.ctx_field is None:
        none = np.zeros(0, dtype=np.int64)
        return (
            np.zeros(n_docs + 1, dtype=np.int64), none, none, np.zeros(0), np.zeros((cap, 0)),
            ctx_tab,
        )  # fmt: skip
    cols = np.unique(np.concatenate([batch.ctx_value, batch.ctx_field]))
    counts = np.zeros((cap, cols.shape[0]))
    kern.gather_postings(cols, stats.head, stats.nxt, stats.pk, stats.pc, cat_of_slot, scale,
                         counts)  # fmt: skip
    return (
        batch.ctx_ptr.astype(np.int64),
        np.searchsorted(cols, batch.ctx_value).astype(np.int64),
        np.searchsorted(cols, batch.ctx_field).astype(np.int64),
        np.asarray(batch.ctx_card, dtype=np.float64),
        counts,
        ctx_tab,
    )
