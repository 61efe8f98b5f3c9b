"""Event building stage: a model step's assignments, confirmed births, retirements and merges
as event dicts in the schema's shape, with deterministic ids."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from noveld.daemon.stages.labels import nearest_known_label
from noveld.daemon.stages.live import LiveNamespace
from noveld.models.base import BatchResult, ClusterModel
from noveld.models.novelty import Confirmation
from noveld.models.suffstats import MultinomialStats
from noveld.models.vocabulary import Vocabulary
from noveld.schema import (
    ASSIGNMENTS_PER_MESSAGE,
    SCHEMA_VERSION,
    ClusterBorn,
    ClusterMerged,
    ClusterRetired,
    DecodedDocument,
    SourcePosition,
    assignment_batch_event_id,
    assignment_event_id,
    format_rfc3339,
    merge_event_id,
)
from noveld.schema import event_id as make_event_id
from noveld.state.base import StateStore

TERM_CHARS = 100
"""Longest term an event lists: a longer token (a URL, base64, a run of letters) is cut with
"…", so events stay far below the 1 MiB Kafka message limit whatever the documents hold."""


def _shortened(term: str) -> str:
    return term if len(term) <= TERM_CHARS else term[: TERM_CHARS - 1] + "…"


def event_time(pos: SourcePosition, doc: DecodedDocument) -> str | None:
    """An event's time for a record: the document's own ``ts`` (docs/events.md), else the
    source's (a Kafka record's timestamp): an archive replayed into Kafka keeps its event
    times instead of taking the replay's."""
    if doc.ts is not None:
        return format_rfc3339(doc.ts)
    return pos.ts


def position_json(pos: SourcePosition, doc: DecodedDocument) -> dict[str, Any]:
    """A record's position as an event's JSON dict, timed by :func:`event_time`."""
    return {
        "topic": pos.topic,
        "partition": pos.partition,
        "offset": pos.offset,
        "ts": event_time(pos, doc),
    }


def cluster_id(uid: int) -> str:
    """A cluster's id in events."""
    return f"c{uid}"


def top_terms(
    model: ClusterModel, stats: MultinomialStats, vocab: Vocabulary, uid: int, n: int
) -> list[tuple[str, float]]:
    """The ``n`` most probable words of a cluster with their share of its tokens; equal
    weights in word order (not id order: ids change when the vocabulary is compacted)."""
    ws, cs = model.term_weights(stats, uid)
    total = float(cs.sum())
    if total <= 0 or n <= 0:
        return []
    if cs.shape[0] > n:  # only words weighing at least the n-th largest can be listed
        near = cs >= np.partition(cs, cs.shape[0] - n)[cs.shape[0] - n]
        ws, cs = ws[near], cs[near]
    word = vocab.word
    top = sorted(zip((-cs).tolist(), (word(int(w)) for w in ws), strict=True))[:n]
    return [(_shortened(w), round(-c / total, 6)) for c, w in top]


class EventBuilder:
    """Builds one namespace's events; keeps the batch's ``if_announced`` offers (ends of
    clusters this writer did not announce, for a store whose replicas announce too)."""

    def __init__(
        self,
        namespace: str,
        model: ClusterModel,
        store: StateStore,
        assignments: str,
        top_terms: int,
    ) -> None:
        self.namespace = namespace
        self.model = model
        self.store = store  # whose replicas may announce clusters too
        self.assignments = assignments  # "off", "document" or "batch" (events.assignments)
        self.top_terms = top_terms
        self.if_announced: set[str] = set()  # the batch's ends of clusters it did not announce
        self.born: list[dict[str, Any]] = []  # the batch's cluster.born events

    def begin(self) -> None:
        """Start a batch with no end events offered and no births."""
        self.if_announced = set()
        self.born = []

    def batch_events(
        self,
        live: LiveNamespace,
        docs: Sequence[DecodedDocument],
        positions: Sequence[SourcePosition],
        result: BatchResult,
        confirmed: Sequence[Confirmation],
    ) -> list[dict[str, Any]]:
        """A step's events in order: assignments, births, retirements, merges (the last two
        timed at the batch's last document)."""
        mode = self.assignments
        events = (
            self.assignment_events(live, docs, positions, result.assignments)
            if mode == "document"
            else self.assignment_batch_events(live, docs, positions, result.assignments)
            if mode == "batch"
            else []
        )
        events += [self.born_event(live, c) for c in confirmed]
        last = SourcePosition(**position_json(positions[-1], docs[-1]))  # its event time
        events += self.retired_events(live, result.retired, last)
        events += self.merged_events(live, result.merged, last)
        return events

    def born_event(self, live: LiveNamespace, c: Confirmation) -> dict[str, Any]:
        """``cluster.born`` for a confirmed birth, which this writer now announces."""
        cand = c.candidate
        cid = cluster_id(cand.uid)
        live.announced.add(cand.uid)
        ev = ClusterBorn(
            event_id=make_event_id(self.namespace, cid, "cluster.born"),
            namespace=self.namespace,
            model=self.model.kind,
            cluster_id=cid,
            founding_doc_id=cand.founding_doc_id,
            born_at=SourcePosition(**cand.born_at),
            confirmed_at=SourcePosition(**c.confirmed_at),
            size=cand.size,
            top_terms=top_terms(self.model, live.state.stats, live.vocab, cand.uid, self.top_terms),
            exemplar_doc_ids=cand.exemplars,
            novelty_score=round(cand.novelty_score, 6),
            nearest_known_label=nearest_known_label(live.state.stats, live.known_labels, cand.uid),
        )
        event = ev.model_dump(mode="json")
        self.born.append(event)
        return event

    def assignment_events(
        self,
        live: LiveNamespace,
        docs: Sequence[DecodedDocument],
        positions: Sequence[SourcePosition],
        assigned: np.ndarray,
    ) -> list[dict[str, Any]]:
        """One ``document.assigned`` per document, in input order (``events.assignments``).
        Plain dicts in the schema's field order: this runs per document on the hot path, and
        ``tests/unit/daemon/test_pipeline_assignments.py`` validates them against
        ``DocumentAssigned``."""
        ns, kind, known = self.namespace, self.model.kind, live.known_labels
        out: list[dict[str, Any]] = []
        for doc, pos, uid in zip(docs, positions, assigned.tolist(), strict=True):
            out.append(
                {
                    "event_id": assignment_event_id(ns, pos),
                    "type": "document.assigned",
                    "schema_version": SCHEMA_VERSION,
                    "namespace": ns,
                    "model": kind,
                    "cluster_id": cluster_id(uid),
                    "doc_id": doc.id,
                    "position": position_json(pos, doc),
                    "label": known.get(uid),
                }
            )
        return out

    def assignment_batch_events(
        self,
        live: LiveNamespace,
        docs: Sequence[DecodedDocument],
        positions: Sequence[SourcePosition],
        assigned: np.ndarray,
    ) -> list[dict[str, Any]]:
        """``documents.assigned`` (``events.assignments = "batch"``): the batch's assignments
        grouped by input partition, in input order, at most ``ASSIGNMENTS_PER_MESSAGE`` per
        event. Plain dicts, validated against ``DocumentsAssigned`` in the unit tests."""
        ns, kind, known = self.namespace, self.model.kind, live.known_labels
        groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
        for doc, pos, uid in zip(docs, positions, assigned.tolist(), strict=True):
            groups.setdefault((pos.topic, pos.partition), []).append(
                {
                    "doc_id": doc.id,
                    "offset": pos.offset,
                    "ts": event_time(pos, doc),
                    "cluster_id": cluster_id(uid),
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

    def retired_events(
        self, live: LiveNamespace, retired: Sequence[tuple[int, float, str]], at: SourcePosition
    ) -> list[dict[str, Any]]:
        """``cluster.retired`` for the clusters this writer announced; with a store whose
        replicas announce clusters too, also for the others, offered to the store as
        ``if_announced`` (kept where another replica announced the cluster: after a reload,
        or when this replica retires a cluster another one confirmed)."""
        out: list[dict[str, Any]] = []
        for uid, mass, reason in retired:
            if uid not in live.announced and not self.store.shared_announcements:
                continue
            cid = cluster_id(uid)
            ev = ClusterRetired(
                event_id=make_event_id(self.namespace, cid, "cluster.retired"),
                namespace=self.namespace,
                model=self.model.kind,
                cluster_id=cid,
                retired_at=at,
                size=round(mass, 6),
                reason=reason,
            )
            if uid not in live.announced:
                self.if_announced.add(ev.event_id)
            live.announced.discard(uid)
            out.append(ev.model_dump(mode="json"))
        return out

    def merged_events(
        self, live: LiveNamespace, merged: Sequence[tuple[int, int, bool]], at: SourcePosition
    ) -> list[dict[str, Any]]:
        """``cluster.merged`` for clusters that existed before this batch (born earlier or on
        another replica); a birth merged within its own batch was never a cluster to anyone.
        The id names the pair, so replicas deciding the same merge emit one event."""
        out: list[dict[str, Any]] = []
        for uid, into, born_now in merged:
            live.announced.discard(uid)
            if born_now:
                continue
            cid = cluster_id(uid)
            ev = ClusterMerged(
                event_id=merge_event_id(self.namespace, cid, cluster_id(into)),
                namespace=self.namespace,
                model=self.model.kind,
                cluster_id=cid,
                into=cluster_id(into),
                merged_at=at,
            )
            out.append(ev.model_dump(mode="json"))
        return out
