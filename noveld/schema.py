"""Wire contract of noveld: the input ``Document`` and the cluster events.

Everything that crosses a process boundary is defined here, so producers, consumers, tests and
docs share one definition; events serialize with ``model_dump_json()``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta, timezone
from enum import StrEnum
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator, model_validator

MAX_ID_CHARS = 256
"""Longest accepted document id, in characters."""

SCHEMA_VERSION = 1
"""Version of the event schema; bumped only on incompatible changes."""


class InvalidReason(StrEnum):
    """Why a record went to the DLQ: a fixed enum, used as the DLQ ``reason`` and metric label."""

    UNDECODABLE = "undecodable"  # bytes are not UTF-8
    NOT_JSON = "not_json"
    NOT_OBJECT = "not_object"
    MISSING_ID = "missing_id"
    BAD_ID = "bad_id"  # not a string (or integer) / empty / longer than MAX_ID_CHARS
    BAD_FIELD = "bad_field"  # some field has the wrong type or an unparsable value
    NO_CONTENT = "no_content"  # none of text / tokens / embedding
    EMPTY_CONTENT = "empty_content"  # no tokens after tokenization (found by the featurizer)
    OVERSIZE = "oversize"  # raw record larger than limits.max_doc_bytes
    NAN_EMBEDDING = "nan_embedding"  # NaN or infinity in the embedding
    WRONG_DIMENSION = "wrong_dimension"  # embedding length differs from the namespace's


_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?"
    r"(?:([Zz])|([+-])([0-9]{2}):([0-9]{2}))?"
)


def parse_rfc3339(value: str) -> float:
    """Convert an RFC 3339 timestamp to epoch seconds; raise ``ValueError`` if it is not one.

    Accepts ``T``, ``t`` or a space as separator and any number of fraction digits. A missing
    offset is read as UTC (lenient: RFC 3339 requires one); a leap second ``:60`` is accepted.
    """
    m = _RFC3339.fullmatch(value)
    if m is None:
        raise ValueError(f"not an RFC 3339 timestamp: {value[:64]!r}")
    year, month, day, hour, minute, second = (int(m.group(i)) for i in range(1, 7))
    leap = 0
    if second == 60:
        second, leap = 59, 1
    tz = UTC
    if m.group(9) is not None:
        oh, om = int(m.group(10)), int(m.group(11))
        if oh > 23 or om > 59:
            raise ValueError(f"bad UTC offset in {value[:64]!r}")
        sign = -1 if m.group(9) == "-" else 1
        tz = timezone(sign * timedelta(hours=oh, minutes=om))
    dt = datetime(year, month, day, hour, minute, second, tzinfo=tz)
    frac = float("0" + m.group(7)) if m.group(7) else 0.0
    epoch = dt.timestamp() + leap + frac
    # the last instants of year 9999 round up to 10000-01-01 in a double: keep them in 9999
    return TS_MAX if TS_MAX < epoch <= _YEAR_10000 else epoch


TS_MIN = -62_135_596_800.0
"""Earliest event time an RFC 3339 timestamp can carry (0001-01-01T00:00:00Z), epoch seconds."""
_YEAR_10000 = 253_402_300_800.0
TS_MAX = math.nextafter(_YEAR_10000, 0.0)
"""Latest (9999-12-31T23:59:59.99997Z, the last double before year 10000); a ``ts`` beyond
either cannot be formatted in events."""


def format_rfc3339(epoch: float) -> str:
    """Format epoch seconds as an RFC 3339 UTC timestamp (millisecond precision, ``Z`` suffix)."""
    dt = datetime.fromtimestamp(epoch, tz=UTC)
    return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")


FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]


class Document(BaseModel):
    """One validated input document; at least one of text/tokens/embedding is set.

    Strict types, so the model itself rejects e.g. non-string tokens; ``ts`` is epoch seconds and
    RFC 3339 strings are converted on validation.
    """

    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")

    id: Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS)]
    text: str | None = None
    tokens: list[str] | None = None
    embedding: list[FiniteFloat] | None = None
    label: str | None = None
    context: dict[str, str] = Field(default_factory=dict)
    ts: Annotated[float, Field(allow_inf_nan=False, ge=TS_MIN, le=TS_MAX)] | None = None

    @field_validator("ts", mode="before")
    @classmethod
    def _ts_from_string(cls, value: Any) -> Any:
        """Accept RFC 3339 strings for ``ts`` and convert them to epoch seconds."""
        if isinstance(value, str):
            return parse_rfc3339(value)
        if isinstance(value, bool):
            raise ValueError("ts must be a number or an RFC 3339 string, not a boolean")
        if isinstance(value, int):
            return float(value)
        return value

    @model_validator(mode="after")
    def _has_content(self) -> Document:
        """Reject documents with none of text, tokens, embedding."""
        if self.text is None and self.tokens is None and self.embedding is None:
            raise ValueError("a document needs at least one of text, tokens, embedding")
        return self


@dataclass(frozen=True, slots=True)
class DecodedDocument:
    """A document as the pipeline carries it: the fields of :class:`Document`, already checked
    (by the decoder, or taken from a validated ``Document``), in a plain frozen dataclass that
    costs far less per record than a pydantic model."""

    id: str
    text: str | None = None
    tokens: list[str] | None = None
    embedding: list[float] | None = None
    label: str | None = None
    context: dict[str, str] = field(default_factory=dict)
    ts: float | None = None

    @classmethod
    def of(cls, doc: Document) -> DecodedDocument:
        """The pipeline's form of a validated document."""
        return cls(doc.id, doc.text, doc.tokens, doc.embedding, doc.label, doc.context, doc.ts)

    def validated(self) -> Document:
        """The same document validated as :class:`Document` (raises if it is not valid)."""
        return Document.model_validate({f.name: getattr(self, f.name) for f in fields(self)})


class SourcePosition(BaseModel):
    """Where a record came from: Kafka topic/partition/offset, or file path ("-": stdin)/line."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    topic: str
    partition: int = 0
    offset: int
    ts: str | None = None  # RFC 3339, the record's event or broker time when known

    @classmethod
    def at(cls, topic: str, partition: int, offset: int, ts: str | None = None) -> SourcePosition:
        """A validated position, one per record: pydantic-core's validator called on a dict
        directly costs about two thirds of the keyword constructor."""
        pos: SourcePosition = cls.__pydantic_validator__.validate_python(
            {"topic": topic, "partition": partition, "offset": offset, "ts": ts}
        )
        return pos


def event_id(namespace: str, cluster_id: str, event_type: str) -> str:
    """Deterministic event id, so a replay re-emits the same ids and consumers can deduplicate.

    First 32 hex chars of sha256 over ``namespace \\0 cluster_id \\0 event_type``.
    """
    key = f"{namespace}\x00{cluster_id}\x00{event_type}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(key).hexdigest()[:32]


def merge_event_id(namespace: str, cluster_id: str, into: str) -> str:
    """Id of the ``cluster.merged`` of ``cluster_id`` into ``into``: :func:`event_id` over the
    pair, so two replicas deciding the same merge emit one event, and a cluster merged into
    two survivors (replicas deciding concurrently) has one event for each."""
    return event_id(namespace, f"{cluster_id}>{into}", "cluster.merged")


class _ClusterEvent(BaseModel):
    """Fields shared by every cluster event; ``event_id`` is derived when not given."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    event_id: str = ""
    type: str
    schema_version: int = SCHEMA_VERSION
    namespace: str
    model: str
    cluster_id: str

    @model_validator(mode="before")
    @classmethod
    def _derive_event_id(cls, data: Any) -> Any:
        """Fill an absent or empty ``event_id`` from (namespace, cluster_id, type); a merge's
        from the pair (:func:`merge_event_id`)."""
        if isinstance(data, dict) and not data.get("event_id"):
            type_field = cls.model_fields.get("type")
            etype = data.get("type") or (type_field.default if type_field else None)
            ns, cid = data.get("namespace"), data.get("cluster_id")
            into = data.get("into")
            if etype == "cluster.merged" and isinstance(into, str) and isinstance(ns, str):
                data = {**data, "event_id": merge_event_id(ns, str(cid), into)}
            elif isinstance(ns, str) and isinstance(cid, str) and isinstance(etype, str):
                data = {**data, "event_id": event_id(ns, cid, etype)}
        return data


class ClusterBorn(_ClusterEvent):
    """A confirmed novel cluster: the novelty event downstream consumers act on."""

    type: Literal["cluster.born"] = "cluster.born"
    founding_doc_id: str
    born_at: SourcePosition
    confirmed_at: SourcePosition
    size: int
    top_terms: list[tuple[str, float]]
    exemplar_doc_ids: list[str]
    novelty_score: float
    nearest_known_label: str | None = None


class ClusterRetired(_ClusterEvent):
    """A cluster left the model: its decayed mass faded below the floor or it was evicted."""

    type: Literal["cluster.retired"] = "cluster.retired"
    retired_at: SourcePosition
    size: float  # remaining (decayed) mass when retired
    reason: Literal["faded", "evicted"]


class ClusterMerged(_ClusterEvent):
    """Cluster ``cluster_id`` was merged into cluster ``into`` (e.g. two births of one story)."""

    type: Literal["cluster.merged"] = "cluster.merged"
    into: str
    merged_at: SourcePosition


def assignment_event_id(namespace: str, position: SourcePosition) -> str:
    """Deterministic id of a ``document.assigned`` event: one per input record (its topic,
    partition and offset), so a replayed batch re-emits the same ids."""
    record = f"{position.topic}\x00{position.partition}\x00{position.offset}"
    return event_id(namespace, record, "document.assigned")


class DocumentAssigned(BaseModel):
    """Where one document was seated (opt-in, ``events.assignments``): its cluster at the commit
    of its batch. Later ``cluster.merged`` events alias the cluster; nothing re-seats it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    event_id: str
    type: Literal["document.assigned"] = "document.assigned"
    schema_version: int = SCHEMA_VERSION
    namespace: str
    model: str
    cluster_id: str
    doc_id: str
    position: SourcePosition
    label: str | None = None  # the known category's label when the cluster is one


ASSIGNMENTS_PER_MESSAGE = 500
"""Most assignments in one ``documents.assigned`` event: with ids of up to ``MAX_ID_CHARS``
characters a message stays far below Kafka's default 1 MB limit."""


def assignment_batch_event_id(namespace: str, topic: str, partition: int, first_offset: int) -> str:
    """Deterministic id of a ``documents.assigned`` event: its input partition and first offset.
    A commit's events are written once, atomically with its offsets, so a duplicate is always a
    re-delivery of the same stored event (same id, same bytes)."""
    record = f"{topic}\x00{partition}\x00{first_offset}"
    return event_id(namespace, record, "documents.assigned")


class Assignment(BaseModel):
    """One document's seat in a ``documents.assigned`` event: like ``DocumentAssigned`` without
    what the enclosing event already says (namespace, model, topic, partition)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    doc_id: str
    offset: int
    ts: str | None = None
    cluster_id: str
    label: str | None = None


class DocumentsAssigned(BaseModel):
    """Where a batch's documents from one input partition were seated, in input order (opt-in,
    ``events.assignments = "batch"``): the same facts as their ``document.assigned`` events in one
    message of at most ``ASSIGNMENTS_PER_MESSAGE``, for throughput."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    event_id: str
    type: Literal["documents.assigned"] = "documents.assigned"
    schema_version: int = SCHEMA_VERSION
    namespace: str
    model: str
    topic: str
    partition: int
    first_offset: int
    last_offset: int
    assignments: list[Assignment]


AnyEvent = ClusterBorn | ClusterRetired | ClusterMerged | DocumentAssigned | DocumentsAssigned
ClusterEvent = Annotated[AnyEvent, Field(discriminator="type")]
"""Any event, discriminated by ``type``."""

_EVENT_ADAPTER: TypeAdapter[AnyEvent] = TypeAdapter(ClusterEvent)


def event_key(event: Mapping[str, Any]) -> str:
    """An event's message key: its cluster id, so one cluster's events stay in order on one
    partition; for ``documents.assigned``, its input ``topic:partition``, so one input
    partition's assignments do."""
    cluster = event.get("cluster_id")
    if cluster is not None:
        return str(cluster)
    return f"{event['topic']}:{event['partition']}"


def parse_event(data: str | bytes) -> AnyEvent:
    """Parse one serialized event (a JSON line) into its model, chosen by its ``type``."""
    return _EVENT_ADAPTER.validate_json(data)


def event_json(event: Mapping[str, Any]) -> str:
    """One event as compact, ASCII-only JSON (non-ASCII text \\u-escaped): the form every sink
    and the Redis outbox carry. orjson's fast path when its output is ASCII, else the stdlib."""
    try:
        raw = orjson.dumps(event)
    except TypeError:  # a value orjson does not serialise: the stdlib decides
        pass
    else:
        if raw.isascii():
            return raw.decode("ascii")
    return json.dumps(event, separators=(",", ":"))


class StoredEvent(dict[str, Any]):
    """An event read back from a store, with ``raw``: the exact JSON it was stored as, so a
    sink sends those bytes instead of serialising the event again."""

    raw: str

    @classmethod
    def parse(cls, raw: str | bytes) -> StoredEvent:
        """Parse a stored event's JSON, keeping the text."""
        text = raw.decode("ascii") if isinstance(raw, bytes) else raw
        ev = cls(orjson.loads(text))
        ev.raw = text
        return ev


def stored_json(event: Mapping[str, Any]) -> str:
    """The event's JSON: the stored text of a :class:`StoredEvent`, else :func:`event_json`."""
    raw = getattr(event, "raw", None)
    return raw if isinstance(raw, str) else event_json(event)
