"""The batch loop, shared by ``run``, ``evaluate`` and ``demo``: a thin orchestrator of the
stages in :mod:`noveld.daemon.stages`.

decode → featurize → model step → novelty tracking → events → atomic commit → publish. Sources,
sinks and the store are injected, so the embedded default and the production daemon run this
same code.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from noveld.connectors.decode import DecodeLimits, FieldNames, Invalid
from noveld.connectors.jsonl import Record
from noveld.daemon.model_kinds import dense_dimension
from noveld.daemon.model_registry import make_model, model_config, variant_of
from noveld.daemon.pipeline_reads import LiveReads
from noveld.daemon.settings import Settings, model_fingerprint
from noveld.daemon.stages import commit as commit_stage
from noveld.daemon.stages import vocabulary as vocabulary_stage
from noveld.daemon.stages.commit import Committer, InputChecksum
from noveld.daemon.stages.decode import DeadLetterSink, Decoder, Rejections, consumed_offsets
from noveld.daemon.stages.events import EventBuilder, event_time, position_json, top_terms
from noveld.daemon.stages.featurize import Views, featurize, text_encoder
from noveld.daemon.stages.labels import label_uid
from noveld.daemon.stages.live import LiveNamespace
from noveld.daemon.stages.long_docs import limit_length
from noveld.daemon.stages.model_step import bind_reserved, fit, refresh
from noveld.daemon.stages.novelty import namespace_count, observe
from noveld.daemon.stages.outbox import EventSink, Outbox
from noveld.daemon.stages.prefetch import Prefetched, Prepared
from noveld.daemon.stages.report import BatchReport, CircuitOpen, StateDiverged
from noveld.daemon.stages.stories import StoryBuilder
from noveld.featurize import Featurizer, Tokenizer, read_texts
from noveld.models.base import BatchResult, DocBatch, StatsDelta
from noveld.models.hdp import live_clusters
from noveld.models.story_table import StoriesChange
from noveld.models.vocabulary import Vocabulary
from noveld.schema import DecodedDocument, SourcePosition
from noveld.state.base import CommitOutcome, NamespaceState, StateStore, partition_key

__all__ = [
    "BatchObserver",
    "BatchReport",
    "CircuitOpen",
    "DeadLetterSink",
    "EventSink",
    "ModelObserver",
    "Pipeline",
    "StateDiverged",
    "event_time",
    "label_uid",
    "make_model",
    "model_config",
    "position_json",
]

log = logging.getLogger("noveld.pipeline")

BatchObserver = Callable[[list[DecodedDocument], list[SourcePosition], np.ndarray], None]
#: sees each model step's featurized batch and result (``noveld fit`` keeps the archive's)
ModelObserver = Callable[[DocBatch, BatchResult], None]

RECENT_BIRTHS = 200
"""``cluster.born`` events the pipeline keeps for the web view (the newest)."""


class Pipeline(LiveReads):
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
        self.input_checksum: InputChecksum | None = None
        self.variant = variant_of(settings.model)
        self.model = self.variant.build(settings)
        tok = settings.tokenizer
        self.tokenizer = Tokenizer(lowercase=tok.lowercase, min_token_len=tok.min_token_len)
        self.commits = Committer(store)
        self.stories = StoryBuilder(settings.stories, self.model)
        #: held while a batch (or a reload) changes the live state: the web view reads it
        #: from its own thread under this lock, at most once a second
        self.lock = threading.RLock()
        #: the newest committed ``cluster.born`` events with the wall time of their commit,
        #: for the web view
        self.recent_births: deque[tuple[float, dict[str, Any]]] = deque(maxlen=RECENT_BIRTHS)
        self.reload()
        f = settings.fields
        self.fields = FieldNames(**f.model_dump())
        self.limits = DecodeLimits(
            max_doc_bytes=settings.limits.max_doc_bytes,
            embedding_dim=dense_dimension(settings.model) if self._embeddings else None,
        )
        m = settings.model
        self.decoder = Decoder(
            self.fields, self.limits, m.use_labels, settings.limits.max_consecutive_invalid
        )
        self.rejects = Rejections()
        self.builder = EventBuilder(
            settings.namespace, self.model, store, settings.events.assignments,
            settings.novelty.top_terms,
        )  # fmt: skip
        self.outbox = Outbox(store)
        self.lease_refusal = ""  # the writer lease's reason when it refused the last commit
        self.publish_pending()

    # ---- public ---------------------------------------------------------------------------
    def reload(self) -> None:
        """(Re)build the live model, vocabulary and novelty tracker from the store — at start,
        and after the store refused a commit (the in-memory model then holds a batch the store
        does not)."""
        with self.lock:
            self._reload()

    def _reload(self) -> None:
        self.commits.uncommitted = False
        self.refusal: CommitOutcome | None = None  # why the store refused the last commit
        fingerprint = model_fingerprint(self.settings)
        loaded = self.store.load(fingerprint)
        state = loaded or NamespaceState(fingerprint, self.model.new_state())
        self._adopt_state(state)

    def _adopt_state(self, state: NamespaceState) -> None:
        """Build the vocabulary, reserved bindings, featurizer and novelty tracker from
        ``state`` (just loaded, or loaded afresh by the store after another writer's
        compaction)."""
        vocab = Vocabulary.from_list(state.vocab, state.vocab_gone, state.vocab_checked)
        bind_reserved(self.variant, self.model, self.store, state, vocab)
        m = self.settings.model
        featurizer = Featurizer(
            self.tokenizer,
            vocab,
            context=self.variant.context and m.use_context,
            embedding_dim=dense_dimension(m) if self._embeddings else 0,
            encoder=text_encoder(m),
            words_view=self.variant.words,
        )
        self.live = LiveNamespace.from_state(state, vocab, featurizer, self.settings.novelty)
        self.stories.load(state.stories)

    @property
    def views(self) -> Views:
        """What documents are clustered by, and whether the encoder makes their vectors."""
        encoded = self.settings.model.featurizer != "words"
        if not self._embeddings:
            return Views("words", encoded)
        return Views("both" if self.variant.words else "vector", encoded)

    @property
    def prefetches(self) -> bool:
        """Whether a file run reads and prepares the next batch while this one is stepped
        (``batch.prefetch``, and the built-in encoder makes the vectors the model clusters
        by: the part of a batch's cost another thread can take)."""
        s = self.settings
        return s.batch.prefetch and self._embeddings and s.model.featurizer != "words"

    def prepare(self, records: Sequence[Record]) -> Prepared:
        """What decoding and featurizing ``records`` computes from their bytes alone, with the
        tokenizer and the encoder (which never change in a run): safe on another thread."""
        decoded = [self.decoder.decode_one(r) for r in records]
        docs = [d for d in decoded if not isinstance(d, Invalid)]
        encoder = text_encoder(self.settings.model) if self._embeddings else None
        views = read_texts(self.tokenizer, encoder, docs)
        return Prepared(decoded, {id(d): v for d, v in zip(docs, views, strict=True)})

    @property
    def _embeddings(self) -> bool:
        """Whether documents are clustered by their embedding (the vmf likelihood)."""
        return self.variant.embeddings

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
            with self.lock:
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
        self.builder.begin()
        self.rejects.begin()
        self.commits.begin()
        live = self.live
        ahead = records.ahead.result() if isinstance(records, Prefetched) else None
        decoded = ahead.decoded if ahead is not None else None
        docs, kept, consumed = self.decoder.decode(
            records, live.known_labels, self.rejects, rep, decoded
        )
        tripped = self.decoder.tripped(records, consumed, self.rejects)
        if tripped:
            next_offsets = consumed_offsets(records, consumed, first_offsets)
        t1 = time.perf_counter()
        # each document's tokens, read once: for the length limit and the featurizer
        read = ahead.read_of(docs) if ahead is not None else None
        if read is None:
            read = read_texts(self.tokenizer, None, docs)  # not encoded: the featurizer does
        lim = self.settings.limits
        docs, kept, read = limit_length(
            docs, kept, read, self.tokenizer, lim.max_doc_tokens, lim.oversize, self.rejects, rep
        )
        batch, docs, kept = featurize(
            live, self.store, docs, kept, self.views, self.rejects, rep, read
        )
        rep.valid = len(docs)
        t2 = time.perf_counter()
        events, delta, stories, t3 = self._cluster(
            batch, docs, [r.position for r in kept], first_offsets, rep
        )
        if rep.invalid:
            self.rejects.send(self.dead_letters)
        request = commit_stage.build_request(
            self.store, live, self.input_checksum, first_offsets, next_offsets, delta, events,
            rep, self.builder.if_announced, stories,
        )  # fmt: skip
        done = self.commits.commit(live, request, rep, lambda: self._adopt_state(live.state))
        if self.builder.born and done.outcome is CommitOutcome.COMMITTED:
            now = time.time()
            self.recent_births.extend(
                (now, e) for e in self.builder.born if e["event_id"] not in done.suppressed
            )
        if done.outcome is CommitOutcome.COMMITTED and not done.moved:
            rep.vocabulary_compacted |= self._check_vocabulary()
        if self.store.flush_due():
            self.flush()
        t4 = time.perf_counter()
        rep.outbox_pending = self.publish_pending(
            sum(1 for e in events if e["event_id"] not in done.suppressed)
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

    def _cluster(
        self,
        batch: DocBatch,
        docs: list[DecodedDocument],
        positions: list[SourcePosition],
        first_offsets: dict[str, int],
        rep: BatchReport,
    ) -> tuple[list[dict[str, Any]], StatsDelta | None, StoriesChange | None, float]:
        """Model step, novelty tracking, event building and story summaries for the batch's
        valid documents; returns the events, the model's delta, the stories' change and when
        the model step ended."""
        if not docs:
            return [], None, None, time.perf_counter()
        live = self.live
        if self.settings.batch.refresh:
            refresh(self.store, live)
        first_index = namespace_count(live.state.stats, self.docs_total)
        result = fit(self.model, self.store, live, batch, docs, first_offsets, self.settings)
        rep.log_predictive_per_token = result.log_predictive_per_token
        t3 = time.perf_counter()
        confirmed = observe(
            live, self.variant, self.model, batch, result, docs, positions, first_index,
            self.settings.novelty.refound,
        )  # fmt: skip
        events = self.builder.batch_events(live, docs, positions, result, confirmed)
        stories = self.stories.change(live, docs, positions, result)
        rep.births = len(confirmed)
        rep.model_births = len(result.born)
        rep.retired = len(result.retired)
        rep.merged = len(result.merged)
        if self.observer is not None:
            self.observer(docs, positions, result.assignments)
        if self.model_observer is not None:
            self.model_observer(batch, result)
        return events, result.delta, stories, t3

    def retry_pending(self) -> int:
        """On an idle turn: deliver events left in the outbox and, now and then, reach the
        store (:meth:`Outbox.retry_pending`)."""
        return self.outbox.retry_pending(self.events)

    def publish_pending(self, added: int = 0) -> int:
        """Deliver committed events from the outbox; returns how many are still pending
        (:meth:`Outbox.publish_pending`)."""
        return self.outbox.publish_pending(self.events, added)

    def flush(self) -> None:
        """Make the committed state durable (snapshot). Not after a batch that stopped between
        its model step and its commit (an unexpected error): the in-memory model then holds
        part of a batch whose offsets were never recorded, and saving it would count those
        documents again on resumption. The last snapshot stands; resuming redoes the batch."""
        if self.commits.uncommitted:
            log.warning("not saving the state: a batch stopped before its commit")
            return
        self._sync_state()
        self.store.flush(self.state)

    def compact_vocabulary(self, in_use: np.ndarray | None = None) -> bool:
        """Renumber the word ids over the words still in use
        (:func:`noveld.daemon.stages.vocabulary.compact`); False when a shared store's
        namespace moved on meanwhile."""
        return vocabulary_stage.compact(self.live, self.store, self.variant, self.model, in_use)

    def top_terms(self, uid: int, n: int) -> list[tuple[str, float]]:
        """The ``n`` most probable words of a cluster with their share of its tokens."""
        return top_terms(self.model, self.state.stats, self.vocab, uid, n)

    # ---- internals ------------------------------------------------------------------------
    def _check_vocabulary(self) -> bool:
        """Compact the vocabulary when a check is due and worth it
        (:func:`noveld.daemon.stages.vocabulary.check`); True when it compacted."""
        return vocabulary_stage.check(self.live, self.settings, self.compact_vocabulary)

    def _sync_state(self) -> None:
        """Copy the featurizer's vocabulary and the tracker into the durable state object."""
        self.live.sync_state()
