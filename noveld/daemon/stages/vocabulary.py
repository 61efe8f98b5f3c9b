"""Vocabulary upkeep stage: at fixed document counts, renumber the word ids over the words
still in use when at least half of a large vocabulary is unused (results do not change)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np

from noveld.daemon.model_registry import ModelVariant
from noveld.daemon.settings import Settings
from noveld.daemon.stages.live import LiveNamespace
from noveld.daemon.stages.model_step import bind_reserved
from noveld.models.base import ClusterModel
from noveld.models.kernels import multinomial as kern
from noveld.models.novelty import member_words, renumber_member_words
from noveld.state.base import StateStore

log = logging.getLogger("noveld.pipeline")

#: documents between looks for unused words without forgetting (with it: a quarter half-life)
VOCABULARY_CHECK_DOCS = 10_000


def check(live: LiveNamespace, settings: Settings, compact: Callable[[np.ndarray], bool]) -> bool:
    """Compact the vocabulary (``compact``, given the mask of the words kept) when a check is
    due and at least half of a vocabulary of ``state.compact_vocabulary_at`` words or more is
    unused — words only: the reserved entries (a hybrid's 2 × 256 vector dimensions, hdp
    topics) are always kept, and counting them would keep a small vocabulary from ever
    compacting; True when it compacted. A check is due each time the namespace's document count
    passes a multiple of a quarter half-life (where forgetting prunes faded words; every
    :data:`VOCABULARY_CHECK_DOCS` documents without forgetting) since the last check, whose
    count is kept with the novelty state (``vocabulary_checked_at``): fixed document counts,
    as for pruning, and a check the process died before — between a commit and its
    compaction — runs at the next batch on the same state, so a resumed or replaying
    process compacts exactly where a clean one does and ends with the same word ids. Every
    model keeps its word statistics in the postings (``svi``'s λ, ``hdp``'s topics too),
    so every model may compact."""
    half_life = settings.model.half_life_docs
    period = max(int(half_life / 4), 1) if half_life > 0 else VOCABULARY_CHECK_DOCS
    docs = int(live.state.stats.ictl[kern.DOCS_SEEN])
    last = live.vocabulary_checked_at
    if docs // period <= last // period:
        return False
    live.vocabulary_checked_at = docs
    at = settings.state.compact_vocabulary_at
    n = len(live.vocab)
    reserved = live.vocab.reserved  # always kept, never words: not in either count
    if not at or n - reserved < at:
        return False
    in_use = words_kept(live, n, live.tracker.to_json())
    if 2 * (int(np.count_nonzero(in_use)) - reserved) > n - reserved:
        return False
    if compact(in_use):
        return True
    live.vocabulary_checked_at = last  # refused: the namespace moved on; check again
    return False


def words_kept(live: LiveNamespace, n: int, novelty: dict[str, Any]) -> np.ndarray:
    """Mask over the ``n`` word ids: the words a compaction keeps — those some live cluster
    counts, those of pending novelty candidates' members, and every reserved entry (hdp
    topics, context values and fields — whose number per field the context likelihood
    counts —, edcm length bins, vmf dimensions)."""
    in_use = live.state.stats.words_in_use(n)
    in_use[member_words(novelty)] = True
    in_use[live.vocab.reserved_ids()] = True
    return in_use


def compact(
    live: LiveNamespace,
    store: StateStore,
    variant: ModelVariant,
    model: ClusterModel,
    in_use: np.ndarray | None,
) -> bool:
    """Renumber the word ids over the words some live cluster (or a novelty candidate's
    member) still uses — ``in_use``, when the caller has that mask already; the rest are
    remembered by hash so V stays every word ever seen. Results do not change
    (:meth:`MultinomialStats.renumbered`). False when a shared store's namespace moved on
    meanwhile (tried again at the next check)."""
    n = len(live.vocab)
    novelty = live.novelty_json()
    if in_use is None:
        in_use = words_kept(live, n, novelty)
    kept = np.flatnonzero(in_use)
    new_id = np.full(max(n, 1), -1, dtype=np.int64)
    new_id[kept] = np.arange(kept.shape[0], dtype=np.int64)
    stats = live.state.stats.renumbered(kept, n)
    vocab = live.vocab.compacted(kept)
    novelty = renumber_member_words(novelty, new_id)
    if not store.compact_vocabulary(live.state, stats, vocab.to_list(), vocab.gone, novelty):
        log.info("vocabulary compaction skipped: the shared namespace moved on meanwhile")
        return False
    live.vocab = vocab
    live.featurizer.vocabulary = vocab
    live.tracker.load_json(novelty)
    bind_reserved(variant, model, store, live.state, vocab)  # the reserved entries have new ids too
    log.info(
        "compacted the vocabulary: %d of %d words in use kept, %d words in all",
        kept.shape[0], n, len(vocab) + vocab.dropped,
    )  # fmt: skip
    return True
