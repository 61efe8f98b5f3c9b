"""The state-store contract: load a namespace, commit batches atomically with offsets.

A commit carries the batch's *first* offsets (what the store must currently hold, else the batch
was already applied: Replay) and its *next* offsets, plus the events for the outbox.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from noveld.models.base import StatsDelta
from noveld.models.story_table import StoriesChange, StoryTable
from noveld.models.suffstats import MultinomialStats
from noveld.models.vocabulary import Vocabulary


class CommitOutcome(enum.Enum):
    """Result of :meth:`StateStore.commit`."""

    COMMITTED = "committed"
    REPLAY = "replay"
    FENCED = "fenced"
    STALE = "stale"  # the vocabulary was compacted since this writer loaded: its ids are old


@dataclass(frozen=True)
class CommitResult:
    """What :meth:`StateStore.commit` did with a batch."""

    outcome: CommitOutcome
    #: ids of the batch's cluster events the store left out because another writer had already
    #: announced that step of the cluster's life (a shared store announces each once)
    suppressed: tuple[str, ...] = ()
    #: the commit was followed by loading the namespace afresh with renumbered word ids
    #: (another writer compacted the vocabulary just after it): the owner must reload
    vocabulary_moved: bool = False
    #: why the single writer's lease (svi) refused the commit, '' when it did not
    lease_refusal: str = ""
    #: documents the other writers' entries applied after the commit seated, per cluster uid
    #: (the cluster it lives on in here): evidence for this writer's novelty candidates
    foreign_docs: dict[int, int] = field(default_factory=dict)


class StaleVocabulary(RuntimeError):
    """Another writer compacted the shared vocabulary: this writer's word ids are old, so it
    must reload the state and read its batch again."""


class FingerprintMismatch(RuntimeError):
    """The stored namespace was written by a model with incompatible settings."""


KNOWN_LABEL_SLOT = (1 << 20) - 1
"""The uid slot of known-label clusters (uid = slot << 40 | hash of the label)."""

FIRST_RESERVED_SLOT = (1 << 20) - 2
"""uid slots from here on are not counters a store hands out: hdp's topics (2^20 − 2,
``noveld.models.hdp.TOPIC_SLOT``) and known labels (2^20 − 1)."""


def partition_key(topic: str, partition: int) -> str:
    """Key of a topic-partition in the offsets map."""
    return f"{topic}:{partition}"


@dataclass
class NamespaceState:
    """Everything durable about one namespace: model statistics, vocabulary, novelty candidates,
    consumed offsets (next offset per topic-partition) and counters."""

    fingerprint: dict[str, Any]
    stats: MultinomialStats
    vocab: list[str] = field(default_factory=list)
    #: hashes of the words vocabulary compaction took out (``Vocabulary.gone``), sorted
    vocab_gone: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    #: words at the head of ``vocab`` that are no gone word come back (``Vocabulary.checked``)
    vocab_checked: int = 0
    novelty: dict[str, Any] = field(default_factory=dict)
    offsets: dict[str, int] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    #: story summaries of the live clusters (``noveld.models.story_table``)
    stories: StoryTable = field(default_factory=StoryTable)


@dataclass(frozen=True)
class CommitRequest:
    """One batch's commit: expected (first) and next offsets, the delta and outgoing events."""

    first_offsets: dict[str, int]
    next_offsets: dict[str, int]
    delta: StatsDelta | None
    events: list[dict[str, Any]]
    counters: dict[str, int]
    novelty: dict[str, Any] | None = None
    #: ids of end events (``cluster.retired``) the writer offers for clusters it did not
    #: announce itself: kept only where the store knows another writer announced the cluster
    if_announced: frozenset[str] = frozenset()
    #: the batch's change to the story summaries (None: summaries are off)
    stories: StoriesChange | None = None


class StateStore(Protocol):
    """Durable model state; implementations: MemoryStore (+snapshot), RedisStore."""

    #: whether other writers announce clusters of this namespace too (then the store, not the
    #: writer, knows which clusters were announced: see ``CommitRequest.if_announced``)
    shared_announcements: bool

    def load(self, fingerprint: dict[str, Any]) -> NamespaceState | None:
        """The stored state, None if the namespace is new; FingerprintMismatch if incompatible."""

    def intern(self, state: NamespaceState, known: int, new_words: list[str]) -> list[str]:
        """Make ``new_words`` (unseen by the caller, whose vocabulary is ``state.vocab[:known]``)
        part of the namespace's vocabulary; returns its words from ``known`` on, which differ
        from ``new_words`` only when another writer added words meanwhile."""

    def before_batch(self, state: NamespaceState, first_offsets: dict[str, int]) -> None:
        """Prepare the statistics for a batch from these partitions (cluster uid range)."""

    def refresh(self, state: NamespaceState) -> dict[int, int]:
        """Apply to ``state`` what other writers committed since this writer last took their
        commits in (a shared store; nothing elsewhere), before it seats a batch; the
        documents they seated per cluster uid (as :attr:`CommitResult.foreign_docs`). What a
        refresh applied, the next commit does not apply again."""

    def commit(self, state: NamespaceState, request: CommitRequest) -> CommitResult:
        """Apply a batch atomically (all or nothing); a shared store also applies what other
        writers committed meanwhile to ``state``."""

    def flush(self, state: NamespaceState) -> None:
        """Make everything committed so far durable (snapshot / fsync)."""

    def ping(self) -> None:
        """A round trip to where the state lives (nothing in process); raises while it is
        unreachable, so an idle daemon notices an outage before its next batch does."""

    def compact_vocabulary(
        self,
        state: NamespaceState,
        stats: MultinomialStats,
        vocab: list[str],
        gone: np.ndarray,
        novelty: dict[str, Any],
    ) -> bool:
        """Make ``stats``, ``vocab``, ``gone`` and ``novelty`` (renumbered word ids) the
        namespace's and ``state``'s; False when the namespace moved on meanwhile (another
        writer committed or added words), and nothing changed."""

    def flush_due(self) -> bool:
        """Whether the owner should call :meth:`flush` now (periodic snapshots)."""

    @property
    def wants_batch_state(self) -> bool:
        """Whether commits must carry the vocabulary growth and novelty state of each batch
        (stores that persist per batch) or the owner syncs them only before a flush."""

    def replicated(self) -> bool:
        """Whether every commit so far would survive a failover of the store (it reached the
        configured number of replicas), so that its events may be published."""

    def outbox_pending(self) -> list[dict[str, Any]]:
        """Committed events not yet acknowledged by the sink."""

    def ack(self, event_ids: list[str]) -> None:
        """Drop delivered events from the outbox."""


def births_among(events: list[dict[str, Any]], event_ids: Collection[str]) -> int:
    """How many of ``events`` are ``cluster.born`` events with one of these ids."""
    if not event_ids:  # the usual case: nothing was left out
        return 0
    ids = set(event_ids)
    return sum(1 for e in events if e.get("type") == "cluster.born" and e.get("event_id") in ids)


def _word_key(vocab: list[str], w: int) -> str:
    """A word as the digest knows it: its text, or its id when the statistics were built
    without a vocabulary (model-level tests)."""
    return vocab[w] if w < len(vocab) else f"\x00#{w}"


def state_digest(state: NamespaceState) -> str:
    """Hash of the true statistics keyed by cluster uid and word, V (every word ever seen) and
    the offsets.

    Independent of slot layout, postings order and word ids, so two runs that reached the same
    model by different paths (a crash and resume vs. a clean run, a vocabulary compacted or
    not) have the same digest.
    """
    stats = state.stats
    vocab = state.vocab
    words_ever = (
        len(vocab) + Vocabulary.from_list(vocab, state.vocab_gone, state.vocab_checked).dropped
    )
    h = hashlib.sha256()
    h.update(json.dumps([words_ever, sorted(state.offsets.items())]).encode())
    for k in sorted(stats.active_slots().tolist(), key=lambda s: int(stats.uid[s])):
        ws, cs = stats.word_counts(int(k))
        pairs = sorted((_word_key(vocab, int(w)), float(c)) for w, c in zip(ws, cs, strict=True))
        h.update(np.int64(stats.uid[k]).tobytes())
        h.update(np.float64(stats.m[k] * stats.scale).tobytes())
        h.update(np.float64(stats.ntok[k] * stats.scale).tobytes())
        h.update(json.dumps(pairs, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    return h.hexdigest()
