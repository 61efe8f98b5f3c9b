"""The batch loop of DESIGN §3, shared by ``run``, ``evaluate`` and ``demo``.

decode → featurize → model step → novelty tracking → atomic commit → publish. Sources, sinks and
the store are injected, so the embedded default and the production daemon run this same code.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from noveld.connectors.decode import DecodeLimits, FieldNames, Invalid, decode_record
from noveld.connectors.errors import DeliveryFailed, EventsRefused
from noveld.connectors.jsonl import Record
from noveld.daemon.settings import Settings, model_fingerprint
from noveld.featurize import Featurizer, Tokenizer
from noveld.models.base import BatchResult, ClusterModel, DocBatch
from noveld.models.dpmm import DPMM, DPMMConfig
from noveld.models.edcm import EDCMConfig, EDCMMixture, length_token
from noveld.models.hdp import HDP, HDPConfig, live_clusters, topic_token
from noveld.models.kernels import multinomial as kern
from noveld.models.kernels.edcm import N_BINS as EDCM_LENGTH_BINS
from noveld.models.novelty import (
    Confirmation,
    NoveltyTracker,
    member_words,
    renumber_member_words,
)
from noveld.models.svi import SVI, SVIConfig
from noveld.models.vmf import VMFConfig, VMFMixture, dimension_tokens
from noveld.models.vocabulary import Vocabulary, uncounted_ids
from noveld.schema import (
    ASSIGNMENTS_PER_MESSAGE,
    SCHEMA_VERSION,
    ClusterBorn,
    ClusterMerged,
    ClusterRetired,
    Document,
    InvalidReason,
    SourcePosition,
    assignment_batch_event_id,
    assignment_event_id,
    format_rfc3339,
)
from noveld.schema import event_id as make_event_id
from noveld.state.base import (
    KNOWN_LABEL_SLOT,
    CommitOutcome,
    CommitRequest,
    NamespaceState,
    StaleVocabulary,
    StateStore,
    births_among,
    partition_key,
)

log = logging.getLogger("noveld.pipeline")

DELIVERY_RETRY_S = 1.0
"""After a delivery attempt left events in the outbox (held for the replicas, or the sink down),
the next attempt reads the outbox no sooner than this: reading a long outbox every batch made a
held backlog cost O(backlog) per batch (measured: 7,600 → under 500 docs/s over 60,000
documents with assignment events held for a missing replica)."""
IDLE_PING_S = 5.0
"""How often an idle daemon reaches its state store (:meth:`Pipeline.retry_pending`)."""
#: documents between looks for unused words without forgetting (with it: a quarter half-life)
VOCABULARY_CHECK_DOCS = 10_000


def label_uid(label: str) -> int:
    """The cluster uid of a known label: a deterministic 40-bit hash in its own uid slot, so
    every replica and every restart agrees without coordination."""
    digest = hashlib.blake2b(label.encode(), digest_size=5).digest()
    return (KNOWN_LABEL_SLOT << 40) | int.from_bytes(digest, "big")


class CircuitOpen(RuntimeError):
    """Too many invalid records in a row: stop rather than dead-letter a whole stream."""

    def __init__(self, message: str, report: BatchReport) -> None:
        super().__init__(message)
        self.report = report


class StateDiverged(RuntimeError):
    """A shared store refused a commit (fenced, already applied, or its vocabulary compacted
    by another writer): the in-memory model no longer matches it, so this process must reload
    (or stop)."""

    def __init__(self, message: str, outcome: CommitOutcome, lease_refusal: str = "") -> None:
        super().__init__(message)
        self.outcome = outcome
        self.lease_refusal = lease_refusal  # why the writer lease refused, '' if it did not


class EventSink(Protocol):
    """Where committed events go (stdout, a list, a Kafka topic)."""

    def publish(self, events: Sequence[dict[str, Any]]) -> None:
        """Deliver events; return only when they are durable downstream."""


class DeadLetterSink(Protocol):
    """Where invalid records go (a file, a Kafka topic)."""

    def send(self, record: Record, reason: InvalidReason, detail: str) -> None:
        """Dead-letter one record with its reason."""

    def flush(self) -> None:
        """Make dead letters durable (called before the offsets covering them are committed)."""


def _empty_detail(doc: Document, embeddings: bool) -> str:
    """Why a decoded document has nothing to cluster."""
    if embeddings:
        if doc.embedding is None:
            return "no embedding: the vmf likelihood clusters documents by their embedding"
        return "zero embedding: a zero vector has no direction"
    if doc.text is None and doc.tokens is None and doc.embedding is not None:
        return "embedding only: no text or tokens (embeddings are clustered with --likelihood vmf)"
    return "no tokens after tokenization"


def event_time(pos: SourcePosition, doc: Document) -> str | None:
    """An event's time for a record: the document's own ``ts`` (docs/events.md), else the
    source's (a Kafka record's timestamp): an archive replayed into Kafka keeps its event
    times instead of taking the replay's."""
    if doc.ts is not None:
        return format_rfc3339(doc.ts)
    return pos.ts


def position_json(pos: SourcePosition, doc: Document) -> dict[str, Any]:
    """A record's position as an event's JSON dict, timed by :func:`event_time`."""
    return {
        "topic": pos.topic,
        "partition": pos.partition,
        "offset": pos.offset,
        "ts": event_time(pos, doc),
    }


class _PositionDicts(Sequence[dict[str, Any]]):
    """Positions as JSON dicts, converted only for the few the novelty tracker keeps; a
    document's own ``ts`` (event time) fills in the position's time when the source has none."""

    def __init__(self, positions: Sequence[SourcePosition], docs: Sequence[Document]) -> None:
        self._positions = positions
        self._docs = docs

    def __len__(self) -> int:
        return len(self._positions)

    def __getitem__(self, i: int) -> dict[str, Any]:  # type: ignore[override]
        return position_json(self._positions[i], self._docs[i])


class _BatchFeatures(Sequence[tuple[np.ndarray, np.ndarray]]):
    """(word ids, counts) of each document of a batch, sliced only when asked for."""

    def __init__(self, batch: DocBatch) -> None:
        self._batch = batch

    def __len__(self) -> int:
        return len(self._batch)

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:  # type: ignore[override]
        return self._batch.doc(i)


BatchObserver = Callable[[list[Document], list[SourcePosition], np.ndarray], None]
#: sees each model step's featurized batch and result (``noveld fit`` keeps the archive's)
ModelObserver = Callable[[DocBatch, BatchResult], None]


@dataclass
class BatchReport:
    """What one step did (for progress output and metrics)."""

    records: int = 0
    valid: int = 0
    invalid: int = 0
    births: int = 0
    model_births: int = 0
    retired: int = 0
    merged: int = 0
    outbox_pending: int = 0
    events_refused: int = 0  # events dropped since the start because no broker takes them
    held_for_replicas: bool = False  # the pending events wait for Redis replicas to catch up
    replayed: bool = False
    clusters_active: int = 0
    vocabulary: int = 0  # entries of the namespace's vocabulary (words; hdp's own entries)
    vocabulary_compacted: bool = False  # the vocabulary was compacted in this step
    log_predictive_per_token: float = float("nan")
    stage_seconds: dict[str, float] = field(default_factory=dict)
    invalid_reasons: dict[str, int] = field(default_factory=dict)


def make_model(settings: Settings) -> ClusterModel:
    """The configured inference engine."""
    m = settings.model
    if m.kind == "hdp":
        return HDP(
            HDPConfig(
                topics=m.topics,
                beta=m.beta,
                zeta=m.zeta,
                table_alpha=m.table_alpha,
                gamma=m.gamma,
                discount=m.discount,
                resample_concentrations=m.resample_concentrations,
                context_prior=m.context_prior,
                split=m.split,
                merge=m.merge,
                absorb_margin=m.absorb_margin,
                sweeps=m.rejuvenation_sweeps,
                deterministic=m.deterministic,
                half_life_docs=m.half_life_docs,
                retire_min_mass=m.retire_min_mass,
                max_active_clusters=m.max_active_clusters,
            )
        )
    if m.likelihood == "edcm":
        base = replace(model_config(settings), merge=False, split=False)
        return EDCMMixture(
            EDCMConfig(**base.__dict__, prior=m.edcm_prior, prior_docs=m.edcm_prior_docs)
        )
    if m.likelihood == "vmf":
        base = replace(model_config(settings), merge=False, split=False)
        return VMFMixture(
            VMFConfig(**base.__dict__, dimension=m.embedding_dim, cosine=m.vmf_cosine)
        )
    if m.kind == "svi":
        base = replace(model_config(settings), rejuvenation_sweeps=m.local_sweeps)
        return SVI(
            SVIConfig(
                **base.__dict__,
                kappa=m.kappa,
                tau0=m.tau0,
                corpus_size=m.corpus_size,
                local_step=m.local_step,
            )
        )
    return DPMM(model_config(settings))


def model_config(settings: Settings) -> DPMMConfig:
    """Model hyperparameters from the settings (the ``dpmm`` part, shared by ``svi``)."""
    m = settings.model
    return DPMMConfig(
        alpha=m.alpha,
        beta=m.beta,
        alpha_scaling=m.alpha_scaling,
        rejuvenation_sweeps=m.rejuvenation_sweeps,
        deterministic=m.deterministic,
        half_life_docs=m.half_life_docs,
        retire_min_mass=m.retire_min_mass,
        max_active_clusters=m.max_active_clusters,
        discount=m.discount,
        merge=m.merge,
        absorb_margin=m.absorb_margin,
        split=m.split,
    )


TERM_CHARS = 100
"""Longest term an event lists: a longer token (a URL, base64, a run of letters) is cut with
"…", so events stay far below the 1 MiB Kafka message limit whatever the documents hold."""


def _shortened(term: str) -> str:
    return term if len(term) <= TERM_CHARS else term[: TERM_CHARS - 1] + "…"


class Pipeline:
    """Owns the live model state of one namespace and turns record batches into commits."""

    def __init__(
        self,
        settings: Settings,
        store: StateStore,
        events: EventSink,
        dead_letters: DeadLetterSink,
        observer: BatchObserver | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.events = events
        self.dead_letters = dead_letters
        self.observer = observer
        self.model_observer: ModelObserver | None = None
        #: the checksum of an input's lines before an offset (``JsonlSource.checksum_at``), for
        #: file and stdin inputs: kept with each commit so a resumed run can tell its input
        #: is still the one the state was built from
        self.input_checksum: Callable[[str, int], int | None] | None = None
        self.model = make_model(settings)
        tok = settings.tokenizer
        self.tokenizer = Tokenizer(lowercase=tok.lowercase, min_token_len=tok.min_token_len)
        self.reload()
        f = settings.fields
        self.fields = FieldNames(**f.model_dump())
        self.limits = DecodeLimits(
            max_doc_bytes=settings.limits.max_doc_bytes,
            embedding_dim=settings.model.embedding_dim if self._embeddings else None,
        )
        self.consecutive_invalid = 0
        self._if_announced: set[str] = set()  # the batch's ends of clusters it did not announce
        #: the batch's rejected records (record, reason, detail), sent in input order
        self._dead: list[tuple[Record, InvalidReason, str]] = []
        self._delivery_failing = False
        self._replication_holding = False
        self.published = 0  # events this process has delivered (since it started)
        self.refused_events = 0  # events the sink refused for good (too large), dropped
        self.pending_events = 0  # events left in the outbox by the last delivery attempt
        self._next_attempt = 0.0  # monotonic time before which pending events are not re-read
        self._next_ping = time.monotonic() + IDLE_PING_S  # next idle round trip to the store
        self.lease_refusal = ""  # the writer lease's reason when it refused the last commit
        self.publish_pending()

    # ---- public ---------------------------------------------------------------------------
    def reload(self) -> None:
        """(Re)build the live model, vocabulary and novelty tracker from the store — at start,
        and after the store refused a commit (the in-memory model then holds a batch the store
        does not)."""
        self._uncommitted = False
        self.refusal: CommitOutcome | None = None  # why the store refused the last commit
        fingerprint = model_fingerprint(self.settings)
        loaded = self.store.load(fingerprint)
        self.state: NamespaceState = loaded or NamespaceState(fingerprint, self.model.new_state())
        self._adopt_state()

    def _adopt_state(self) -> None:
        """Build the vocabulary, reserved bindings, featurizer and novelty tracker from
        ``self.state`` (just loaded, or loaded afresh by the store after another writer's
        compaction)."""
        self.vocab = Vocabulary.from_list(
            self.state.vocab, self.state.vocab_gone, self.state.vocab_checked
        )
        self._bind_reserved()
        m = self.settings.model
        self.featurizer = Featurizer(
            self.tokenizer,
            self.vocab,
            context=m.kind == "hdp" and m.use_context,
            embedding_dim=m.embedding_dim if self._embeddings else 0,
        )
        nov = self.settings.novelty
        self.tracker = NoveltyTracker(nov.min_size, nov.confirm_within, nov.exemplars)
        self.tracker.load_json(self.state.novelty)
        self.announced: set[int] = set(self.state.novelty.get("announced", []))
        #: the document count of the last vocabulary check (a namespace from before the
        #: count was kept: checked where it stands)
        self.vocabulary_checked_at = int(
            self.state.novelty.get("vocabulary_checked_at", self.state.stats.ictl[kern.DOCS_SEEN])
        )
        self.known_labels: dict[int, str] = {
            int(u): str(label) for u, label in self.state.novelty.get("known", {}).items()
        }
        #: per file or stdin input, the checksum of the lines committed from it (``offset``,
        #: ``crc32``): what a resumed run compares the lines it skips with
        self.inputs: dict[str, dict[str, int]] = dict(self.state.novelty.get("inputs", {}))

    def _bind_reserved(self) -> None:
        """Tell the model the ids of its reserved vocabulary entries (hdp topics, vmf
        dimensions, edcm length bins), interning those the namespace lacks (at start, and
        after a vocabulary compaction renumbered them)."""
        if isinstance(self.model, HDP | VMFMixture):  # context values, embedding dimensions
            self.model.uncounted_words = lambda: uncounted_ids(self.state.vocab)
        if isinstance(self.model, HDP):
            topics = range(self.model.config.topics)
            self.model.bind_topic_words(self._reserved_ids([topic_token(t) for t in topics]))
        if isinstance(self.model, VMFMixture):
            pairs = [dimension_tokens(j) for j in range(self.model.config.dimension)]
            ids = self._reserved_ids([t for pair in pairs for t in pair])
            self.model.bind_dimension_words(ids[0::2], ids[1::2])
        if isinstance(self.model, EDCMMixture):
            bins = range(EDCM_LENGTH_BINS)
            self.model.bind_length_words(self._reserved_ids([length_token(b) for b in bins]))

    @property
    def _embeddings(self) -> bool:
        """Whether documents are clustered by their embedding (the vmf likelihood)."""
        return self.settings.model.likelihood == "vmf"

    def _reserved_ids(self, wanted: list[str]) -> list[int]:
        """Vocabulary ids of the model's reserved entries (hdp topics, vmf dimensions, edcm
        length bins):
        namespace-wide, interned through the store like any new word."""
        missing = [w for w in wanted if w not in self.vocab]
        if missing:
            known = len(self.state.vocab)
            shared = self.store.intern(self.state, known, missing)
            self.vocab.extend(shared)
        ids = [self.vocab.get(w) for w in wanted]
        return [int(i) for i in ids if i is not None]

    def next_offset(self, topic: str, partition: int) -> int:
        """Where to resume reading a topic-partition (the committed next offset)."""
        return self.state.offsets.get(partition_key(topic, partition), 0)

    @property
    def docs_total(self) -> int:
        """Valid documents committed so far."""
        return self.state.counters.get("docs", 0)

    def step(
        self, records: Sequence[Record], first_offsets: dict[str, int], next_offsets: dict[str, int]
    ) -> BatchReport:
        """Process one batch end to end; raise CircuitOpen after committing if the breaker trips."""
        invalid_run = self.consecutive_invalid
        try:
            return self._step(records, first_offsets, next_offsets)
        except StateDiverged as exc:
            self.refusal = exc.outcome
            self.lease_refusal = exc.lease_refusal
            self.consecutive_invalid = invalid_run  # the batch is read again: counted once
            raise

    def _step(
        self, records: Sequence[Record], first_offsets: dict[str, int], next_offsets: dict[str, int]
    ) -> BatchReport:
        rep = BatchReport(records=len(records))
        t0 = time.perf_counter()
        # a check the last commit crossed but that did not run (the process died between the
        # commit and the compaction; the store refused the compaction): on the same state now
        rep.vocabulary_compacted = self._check_vocabulary()
        self._if_announced = set()
        self._dead = []
        self._uncommitted = True  # from here the in-memory model may run ahead of the store
        docs, kept, consumed = self._decode(records, rep)
        tripped = consumed < len(records) or (
            self.consecutive_invalid >= self.settings.limits.max_consecutive_invalid
        )
        if tripped:
            next_offsets = dict(first_offsets)
            for r in records[:consumed]:
                key = partition_key(r.position.topic, r.position.partition)
                next_offsets[key] = r.position.offset + 1
        t1 = time.perf_counter()
        try:
            batch, empty = self._featurize(docs)
        except StaleVocabulary as exc:
            raise StateDiverged(
                f"{exc}; the in-memory model's word ids are old", CommitOutcome.STALE
            ) from exc
        if empty:
            drop = set(empty)
            for i in sorted(drop):
                detail = _empty_detail(docs[i], self._embeddings)
                self._dead_letter(kept[i], InvalidReason.EMPTY_CONTENT, detail, rep)
            docs = [d for i, d in enumerate(docs) if i not in drop]
            kept = [r for i, r in enumerate(kept) if i not in drop]
        positions = [r.position for r in kept]
        rep.valid = len(docs)
        t2 = time.perf_counter()
        first_index = self.docs_total
        seed_parts = [self.settings.model.seed, *sorted(first_offsets.values())]
        rng = np.random.default_rng(seed_parts)
        events: list[dict[str, Any]] = []
        delta = None
        if docs:
            self.store.before_batch(self.state, first_offsets)
            known = self._known_uids(docs)
            result = self.model.partial_fit(
                batch, self.state.stats, rng, known, frozenset(self.known_labels)
            )
            rep.log_predictive_per_token = result.log_predictive_per_token
            t3 = time.perf_counter()
            confirmed = self.tracker.observe(
                result.born,
                result.assignments.tolist(),
                [d.id for d in docs],
                _PositionDicts(positions, docs),
                first_index,
                [u for u, _, _ in result.retired] + [u for u, _, _ in result.merged],
                self.model.member_features(batch)
                if isinstance(self.model, VMFMixture)
                else _BatchFeatures(batch),
                self.model.refound_test(self.state.stats, batch)
                if self.settings.novelty.refound
                else None,
            )
            mode = self.settings.events.assignments
            events = (
                self._assignment_events(docs, positions, result.assignments)
                if mode == "document"
                else self._assignment_batch_events(docs, positions, result.assignments)
                if mode == "batch"
                else []
            )
            events += [self._born_event(c) for c in confirmed]
            last = SourcePosition(**position_json(positions[-1], docs[-1]))  # its event time
            events += self._retired_events(result.retired, last)
            events += self._merged_events(result.merged, last)
            rep.births = len(confirmed)
            rep.model_births = len(result.born)
            rep.retired = len(result.retired)
            rep.merged = len(result.merged)
            delta = result.delta
            if self.observer is not None:
                self.observer(docs, positions, result.assignments)
            if self.model_observer is not None:
                self.model_observer(batch, result)
        else:
            t3 = time.perf_counter()
        if rep.invalid:
            self._send_dead_letters()
        counters = {
            "docs": rep.valid,
            "invalid": rep.invalid,
            "births": rep.births,
            "clusters": rep.model_births,
            "batches": 1,
        }
        self._note_inputs(next_offsets)
        request = CommitRequest(
            first_offsets, next_offsets, delta, events, counters,
            if_announced=frozenset(self._if_announced),
        )  # fmt: skip
        if self.store.wants_batch_state:
            request = replace(request, novelty=self._novelty_json())
        committed = self.store.commit(self.state, request)
        outcome = committed.outcome
        self._uncommitted = False
        moved = committed.vocabulary_moved
        if moved:  # another writer compacted the vocabulary just after this commit: the store
            self._adopt_state()  # loaded the namespace afresh, this batch included
        elif len(self.state.vocab) > len(self.vocab):  # words other writers added
            self.vocab.extend(self.state.vocab[len(self.vocab) :])
        if outcome is not CommitOutcome.COMMITTED and self.store.wants_batch_state:
            raise StateDiverged(
                f"the state store answered {outcome.value!r} for offsets {first_offsets}: "
                + (
                    committed.lease_refusal
                    or (
                        "another process now owns this input"
                        if outcome is CommitOutcome.FENCED
                        else "another process compacted the shared vocabulary (its word ids "
                        "changed)"
                        if outcome is CommitOutcome.STALE
                        else "this batch was already committed by another process"
                    )
                )
                + "; the in-memory model no longer matches the shared state",
                outcome,
                committed.lease_refusal,
            )
        rep.replayed = outcome is CommitOutcome.REPLAY
        rep.births -= births_among(events, committed.suppressed)  # announced by another replica
        if outcome is CommitOutcome.COMMITTED and not moved:
            rep.vocabulary_compacted |= self._check_vocabulary()
        if self.store.flush_due():
            self.flush()
        t4 = time.perf_counter()
        suppressed = set(committed.suppressed)
        rep.outbox_pending = self.publish_pending(
            sum(1 for e in events if e["event_id"] not in suppressed)
        )
        rep.held_for_replicas = self.held_for_replicas
        rep.events_refused = self.refused_events
        t5 = time.perf_counter()
        rep.clusters_active = live_clusters(self.state.stats)
        rep.vocabulary = len(self.state.vocab)
        rep.stage_seconds = {
            "decode": t1 - t0,
            "featurize": t2 - t1,
            "model": t3 - t2,
            "commit": t4 - t3,
            "publish": t5 - t4,
        }
        if tripped:
            raise CircuitOpen(
                f"{self.consecutive_invalid} invalid records in a row "
                f"(limit {self.settings.limits.max_consecutive_invalid}); stopping",
                rep,
            )
        return rep

    @property
    def held_for_replicas(self) -> bool:
        """Whether the last delivery attempt held events back for the store's replicas."""
        return self._replication_holding

    def retry_pending(self) -> int:
        """On an idle turn: try again to deliver events the last attempt left in the outbox
        (held for the replicas, or the sink was down), so they do not wait for more input;
        and, every :data:`IDLE_PING_S`, reach the store: without input an idle daemon never
        touched Redis, so /readyz said "ready" through a Redis outage until a document came."""
        now = time.monotonic()
        if now >= self._next_ping:
            self._next_ping = now + IDLE_PING_S
            self.store.ping()  # an outage raises here, for the caller to ride out
        return self.publish_pending() if self.pending_events else 0

    def publish_pending(self, added: int = 0) -> int:
        """Deliver committed events from the outbox and acknowledge them; returns how many are
        still pending. A sink that cannot deliver now (:class:`DeliveryFailed`) leaves them in
        the outbox for the next attempt (at least once: a partly delivered set is sent again)
        instead of stopping the daemon; ``noveld_outbox_pending_events`` shows the backlog.
        Events of commits the store's replicas have not acknowledged yet are held the same way
        (:meth:`StateStore.replicated`). While events are pending, the outbox is read again at
        most every :data:`DELIVERY_RETRY_S` seconds; in between, the ``added`` events of each
        commit are counted without reading it."""
        if self.pending_events and time.monotonic() < self._next_attempt:
            self.pending_events += added
            return self.pending_events
        self.pending_events = self._deliver()
        self._next_attempt = time.monotonic() + DELIVERY_RETRY_S if self.pending_events else 0.0
        return self.pending_events

    def _deliver(self) -> int:
        """One delivery attempt of the outbox; returns how many events are still pending."""
        pending = self.store.outbox_pending()
        if not pending:
            return 0
        if not self.store.replicated():  # a failover could still lose these commits
            if not self._replication_holding:
                log.warning(
                    "holding %d events: the state store's replicas have not acknowledged the "
                    "commits yet (redis.replicas_to_ack)",
                    len(pending),
                )
            self._replication_holding = True
            return len(pending)
        if self._replication_holding:
            log.warning("replicas caught up; publishing %d held events", len(pending))
        self._replication_holding = False
        try:
            self.events.publish(pending)
        except EventsRefused as exc:  # the rest went: drop these, or they block the outbox
            for event_id, why in exc.refused.items():
                log.error(
                    "event %s can never be delivered (%s): dropped from the outbox so the "
                    "events after it flow; raise the producer's max_request_size and the "
                    "topic's max.message.bytes to keep such events",
                    event_id,
                    why,
                )
            self.refused_events += len(exc.refused)
            self.published += len(pending) - len(exc.refused)
            self._delivery_failing = False
            self.store.ack([e["event_id"] for e in pending])
            return 0
        except DeliveryFailed as exc:
            if not self._delivery_failing:
                log.warning("cannot deliver %d events now (%s); retrying", len(pending), exc)
            self._delivery_failing = True
            return len(pending)
        if self._delivery_failing:
            log.warning("event delivery recovered; %d events sent", len(pending))
        self._delivery_failing = False
        self.published += len(pending)
        self.store.ack([e["event_id"] for e in pending])
        return 0

    def flush(self) -> None:
        """Make the committed state durable (snapshot). Not after a batch that stopped between
        its model step and its commit (an unexpected error): the in-memory model then holds
        part of a batch whose offsets were never recorded, and saving it would count those
        documents again on resumption. The last snapshot stands; resuming redoes the batch."""
        if self._uncommitted:
            log.warning("not saving the state: a batch stopped before its commit")
            return
        self._sync_state()
        self.store.flush(self.state)

    def compact_vocabulary(self, in_use: np.ndarray | None = None) -> bool:
        """Renumber the word ids over the words some live cluster (or a novelty candidate's
        member) still uses — ``in_use``, when the caller has that mask already; the rest are
        remembered by hash so V stays every word ever seen. Results do not change
        (:meth:`MultinomialStats.renumbered`). False when a shared store's namespace moved on
        meanwhile (tried again at the next check)."""
        n = len(self.vocab)
        novelty = self._novelty_json()
        if in_use is None:
            in_use = self._words_kept(n, novelty)
        kept = np.flatnonzero(in_use)
        new_id = np.full(max(n, 1), -1, dtype=np.int64)
        new_id[kept] = np.arange(kept.shape[0], dtype=np.int64)
        stats = self.state.stats.renumbered(kept, n)
        vocab = self.vocab.compacted(kept)
        novelty = renumber_member_words(novelty, new_id)
        if not self.store.compact_vocabulary(
            self.state, stats, vocab.to_list(), vocab.gone, novelty
        ):
            log.info("vocabulary compaction skipped: the shared namespace moved on meanwhile")
            return False
        self.vocab = vocab
        self.featurizer.vocabulary = vocab
        self.tracker.load_json(novelty)
        self._bind_reserved()  # the model's reserved entries have new ids too
        log.info(
            "compacted the vocabulary: %d of %d words in use kept, %d words in all",
            kept.shape[0], n, len(vocab) + vocab.dropped,
        )  # fmt: skip
        return True

    def top_terms(self, uid: int, n: int) -> list[tuple[str, float]]:
        """The ``n`` most probable words of a cluster with their share of its tokens; equal
        weights in word order (not id order: ids change when the vocabulary is compacted)."""
        ws, cs = self.model.term_weights(self.state.stats, uid)
        total = float(cs.sum())
        if total <= 0 or n <= 0:
            return []
        if cs.shape[0] > n:  # only words weighing at least the n-th largest can be listed
            near = cs >= np.partition(cs, cs.shape[0] - n)[cs.shape[0] - n]
            ws, cs = ws[near], cs[near]
        word = self.vocab.word
        top = sorted(zip((-cs).tolist(), (word(int(w)) for w in ws), strict=True))[:n]
        return [(_shortened(w), round(-c / total, 6)) for c, w in top]

    # ---- internals ------------------------------------------------------------------------
    def _check_vocabulary(self) -> bool:
        """Compact the vocabulary (:meth:`compact_vocabulary`) when a check is due and at least
        half of a vocabulary of ``state.compact_vocabulary_at`` words or more is unused; True
        when it compacted. A check is due each time the namespace's document count passes a
        multiple of a quarter half-life (where forgetting prunes faded words; every
        :data:`VOCABULARY_CHECK_DOCS` documents without forgetting) since the last check, whose
        count is kept with the novelty state (``vocabulary_checked_at``): fixed document counts,
        as for pruning, and a check the process died before — between a commit and its
        compaction — runs at the next batch on the same state, so a resumed or replaying
        process compacts exactly where a clean one does and ends with the same word ids. Every
        model keeps its word statistics in the postings (``svi``'s λ, ``hdp``'s topics too),
        so every model may compact."""
        half_life = self.settings.model.half_life_docs
        period = max(int(half_life / 4), 1) if half_life > 0 else VOCABULARY_CHECK_DOCS
        docs = int(self.state.stats.ictl[kern.DOCS_SEEN])
        last = self.vocabulary_checked_at
        if docs // period <= last // period:
            return False
        self.vocabulary_checked_at = docs
        at = self.settings.state.compact_vocabulary_at
        n = len(self.vocab)
        if not at or n < at:
            return False
        in_use = self._words_kept(n, self.tracker.to_json())
        if 2 * int(np.count_nonzero(in_use)) > n:
            return False
        if self.compact_vocabulary(in_use):
            return True
        self.vocabulary_checked_at = last  # refused: the namespace moved on; check again
        return False

    def _words_kept(self, n: int, novelty: dict[str, Any]) -> np.ndarray:
        """Mask over the ``n`` word ids: the words a compaction keeps — those some live cluster
        counts, those of pending novelty candidates' members, and every reserved entry (hdp
        topics, context values and fields — whose number per field the context likelihood
        counts —, edcm length bins, vmf dimensions)."""
        in_use = self.state.stats.words_in_use(n)
        in_use[member_words(novelty)] = True
        in_use[self.vocab.reserved_ids()] = True
        return in_use

    def _featurize(self, docs: list[Document]) -> tuple[DocBatch, list[int]]:
        """Featurize, then give words new to this process their namespace-wide ids; if another
        writer added words meanwhile, adopt its ids and featurize again."""
        known = len(self.state.vocab)
        batch, empty = self.featurizer.featurize(docs)
        if len(self.vocab) == known:
            return batch, empty
        new_words = self.vocab.words_since(known)
        shared = self.store.intern(self.state, known, new_words)
        if shared != new_words:
            self.vocab.truncate(known)
            self.vocab.extend(shared)
            batch, empty = self.featurizer.featurize(docs)
        return batch, empty

    def _decode(
        self, records: Sequence[Record], rep: BatchReport
    ) -> tuple[list[Document], list[Record], int]:
        """Decode records in order until the breaker trips; returns docs, their records and how
        many records were consumed."""
        docs: list[Document] = []
        kept: list[Record] = []
        limit = self.settings.limits.max_consecutive_invalid
        labels: dict[int, str] = {}  # the batch's new labels, by uid
        use_labels = self.settings.model.use_labels
        for i, rec in enumerate(records):
            out = decode_record(rec.raw, self.fields, self.limits)
            if not isinstance(out, Invalid) and out.label is not None and use_labels:
                clash = self._label_collision(out.label, labels)
                out = out if clash is None else Invalid(InvalidReason.BAD_FIELD, clash)
            if isinstance(out, Invalid):
                self._dead_letter(rec, out.reason, out.detail, rep)
                if self.consecutive_invalid >= limit:
                    return docs, kept, i + 1
            else:
                self.consecutive_invalid = 0
                docs.append(out)
                kept.append(rec)
        return docs, kept, len(records)

    def _label_collision(self, label: str, batch_labels: dict[int, str]) -> str | None:
        """Why a document with ``label`` is rejected — its 40-bit uid (:func:`label_uid`) is
        another known label's, and the two would silently be one category under one name — or
        None, registering the label in ``batch_labels`` (the batch's new labels)."""
        uid = label_uid(label)
        owner = self.known_labels.get(uid, batch_labels.get(uid))
        if owner is None:
            batch_labels[uid] = label
        elif owner != label:
            return (
                f"label {label[:64]!r} has the same 40-bit id as the known label "
                f"{owner[:64]!r} (a hash collision): the two would be one category; rename one"
            )
        return None

    def _dead_letter(
        self, rec: Record, reason: InvalidReason, detail: str, rep: BatchReport
    ) -> None:
        """Count a rejected record; it is sent with the batch's others before the commit."""
        self._dead.append((rec, reason, detail))
        rep.invalid += 1
        rep.invalid_reasons[reason.value] = rep.invalid_reasons.get(reason.value, 0) + 1
        self.consecutive_invalid += 1

    def _send_dead_letters(self) -> None:
        """Send the batch's rejected records in input order — the decoder's and the
        featurizer's (empty content) rejections are found in two passes — and make them
        durable before the batch's offsets are committed."""
        self._dead.sort(key=lambda d: (d[0].position.topic, d[0].position.partition,
                                       d[0].position.offset))  # fmt: skip
        for rec, reason, detail in self._dead:
            self.dead_letters.send(rec, reason, detail)
        self._dead = []
        self.dead_letters.flush()

    def _cluster_id(self, uid: int) -> str:
        return f"c{uid}"

    def _born_event(self, c: Confirmation) -> dict[str, Any]:
        cand = c.candidate
        cid = self._cluster_id(cand.uid)
        self.announced.add(cand.uid)
        ev = ClusterBorn(
            event_id=make_event_id(self.settings.namespace, cid, "cluster.born"),
            namespace=self.settings.namespace,
            model=self.model.kind,
            cluster_id=cid,
            founding_doc_id=cand.founding_doc_id,
            born_at=SourcePosition(**cand.born_at),
            confirmed_at=SourcePosition(**c.confirmed_at),
            size=cand.size,
            top_terms=self.top_terms(cand.uid, self.settings.novelty.top_terms),
            exemplar_doc_ids=cand.exemplars,
            novelty_score=round(cand.novelty_score, 6),
            nearest_known_label=self._nearest_known_label(cand.uid),
        )
        return ev.model_dump(mode="json")

    def _assignment_events(
        self, docs: Sequence[Document], positions: Sequence[SourcePosition], assigned: np.ndarray
    ) -> list[dict[str, Any]]:
        """One ``document.assigned`` per document, in input order (``events.assignments``).
        Plain dicts in the schema's field order: this runs per document on the hot path, and
        ``tests/unit/test_pipeline_assignments.py`` validates them against ``DocumentAssigned``."""
        ns, kind, known = self.settings.namespace, self.model.kind, self.known_labels
        out: list[dict[str, Any]] = []
        for doc, pos, uid in zip(docs, positions, assigned.tolist(), strict=True):
            out.append(
                {
                    "event_id": assignment_event_id(ns, pos),
                    "type": "document.assigned",
                    "schema_version": SCHEMA_VERSION,
                    "namespace": ns,
                    "model": kind,
                    "cluster_id": self._cluster_id(uid),
                    "doc_id": doc.id,
                    "position": position_json(pos, doc),
                    "label": known.get(uid),
                }
            )
        return out

    def _assignment_batch_events(
        self, docs: Sequence[Document], positions: Sequence[SourcePosition], assigned: np.ndarray
    ) -> list[dict[str, Any]]:
        """``documents.assigned`` (``events.assignments = "batch"``): the batch's assignments
        grouped by input partition, in input order, at most ``ASSIGNMENTS_PER_MESSAGE`` per
        event. Plain dicts, validated against ``DocumentsAssigned`` in the unit tests."""
        ns, kind, known = self.settings.namespace, self.model.kind, self.known_labels
        groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
        for doc, pos, uid in zip(docs, positions, assigned.tolist(), strict=True):
            groups.setdefault((pos.topic, pos.partition), []).append(
                {
                    "doc_id": doc.id,
                    "offset": pos.offset,
                    "ts": event_time(pos, doc),
                    "cluster_id": self._cluster_id(uid),
                    "label": known.get(uid),
                }
            )
        out: list[dict[str, Any]] = []
        for (topic, partition), rows in groups.items():
            for start in range(0, len(rows), ASSIGNMENTS_PER_MESSAGE):
                chunk = rows[start : start + ASSIGNMENTS_PER_MESSAGE]
                first = chunk[0]["offset"]
                out.append(
                    {
                        "event_id": assignment_batch_event_id(ns, topic, partition, first),
                        "type": "documents.assigned",
                        "schema_version": SCHEMA_VERSION,
                        "namespace": ns,
                        "model": kind,
                        "topic": topic,
                        "partition": partition,
                        "first_offset": first,
                        "last_offset": chunk[-1]["offset"],
                        "assignments": chunk,
                    }
                )
        return out

    def _retired_events(
        self, retired: Sequence[tuple[int, float, str]], at: SourcePosition
    ) -> list[dict[str, Any]]:
        """``cluster.retired`` for the clusters this writer announced; with a store whose
        replicas announce clusters too, also for the others, offered to the store as
        ``if_announced`` (kept where another replica announced the cluster: after a reload,
        or when this replica retires a cluster another one confirmed)."""
        out: list[dict[str, Any]] = []
        for uid, mass, reason in retired:
            if uid not in self.announced and not self.store.shared_announcements:
                continue
            cid = self._cluster_id(uid)
            ev = ClusterRetired(
                event_id=make_event_id(self.settings.namespace, cid, "cluster.retired"),
                namespace=self.settings.namespace,
                model=self.model.kind,
                cluster_id=cid,
                retired_at=at,
                size=round(mass, 6),
                reason=reason,
            )
            if uid not in self.announced:
                self._if_announced.add(ev.event_id)
            self.announced.discard(uid)
            out.append(ev.model_dump(mode="json"))
        return out

    def _merged_events(
        self, merged: Sequence[tuple[int, int, bool]], at: SourcePosition
    ) -> list[dict[str, Any]]:
        """``cluster.merged`` for clusters that existed before this batch (born earlier or on
        another replica); a birth merged within its own batch was never a cluster to anyone."""
        out: list[dict[str, Any]] = []
        for uid, into, born_now in merged:
            self.announced.discard(uid)
            if born_now:
                continue
            cid = self._cluster_id(uid)
            ev = ClusterMerged(
                event_id=make_event_id(self.settings.namespace, cid, "cluster.merged"),
                namespace=self.settings.namespace,
                model=self.model.kind,
                cluster_id=cid,
                into=self._cluster_id(into),
                merged_at=at,
            )
            out.append(ev.model_dump(mode="json"))
        return out

    def _known_uids(self, docs: Sequence[Document]) -> np.ndarray | None:
        """Cluster uid of each document's known label (−1 without one), registering new labels;
        None when labels are not used or the batch has none."""
        if not self.settings.model.use_labels or not any(d.label is not None for d in docs):
            return None
        out = np.full(len(docs), -1, dtype=np.int64)
        for i, d in enumerate(docs):
            if d.label is not None:
                uid = label_uid(d.label)
                self.known_labels[uid] = d.label
                out[i] = uid
        return out

    def _nearest_known_label(self, uid: int) -> str | None:
        """The known category whose word distribution is closest (cosine) to cluster ``uid``."""
        if not self.known_labels:
            return None
        stats = self.state.stats
        kmax = stats.kmax
        slot_of = {int(u): k for k, u in enumerate(stats.uid[:kmax].tolist()) if stats.alive[k]}
        own = stats.slot_of(uid, retired_too=True)  # born and evicted in one step: still there
        if own < 0:
            return None
        ws, cs = stats.word_counts(own)
        v = dict(zip(ws.tolist(), cs.tolist(), strict=True))
        nv = math.sqrt(sum(c * c for c in v.values())) or 1.0
        best, best_sim = None, 0.0
        for kuid, label in self.known_labels.items():
            if kuid not in slot_of:
                continue
            kw, kc = stats.word_counts(slot_of[kuid])
            dot = sum(c * v.get(w, 0.0) for w, c in zip(kw.tolist(), kc.tolist(), strict=True))
            sim = dot / (nv * (math.sqrt(float((kc * kc).sum())) or 1.0))
            if sim > best_sim:
                best, best_sim = label, sim
        return best

    def _note_inputs(self, next_offsets: dict[str, int]) -> None:
        """Record the checksum of each input's lines up to the batch's next offset (committed
        with it; a refused commit reloads the stored ones)."""
        if self.input_checksum is None:
            return
        for key, offset in next_offsets.items():
            crc = self.input_checksum(key, offset)
            if crc is not None:
                self.inputs[key] = {"offset": offset, "crc32": crc}

    def _novelty_json(self) -> dict[str, Any]:
        novelty = self.tracker.to_json()
        novelty["announced"] = sorted(self.announced)
        novelty["vocabulary_checked_at"] = self.vocabulary_checked_at
        novelty["known"] = {str(u): label for u, label in sorted(self.known_labels.items())}
        if self.inputs:
            novelty["inputs"] = {k: dict(v) for k, v in sorted(self.inputs.items())}
        return novelty

    def _sync_state(self) -> None:
        """Copy the featurizer's vocabulary and the tracker into the durable state object."""
        self.state.vocab = self.vocab.to_list()
        self.state.vocab_gone = self.vocab.gone
        self.state.vocab_checked = self.vocab.checked
        self.state.novelty = self._novelty_json()
