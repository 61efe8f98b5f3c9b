"""Tests of the wire contract in noveld.schema: Document validation, timestamps, events."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from noveld.schema import (
    Assignment,
    ClusterBorn,
    ClusterMerged,
    ClusterRetired,
    DecodedDocument,
    Document,
    DocumentAssigned,
    DocumentsAssigned,
    InvalidReason,
    SourcePosition,
    StoredEvent,
    assignment_batch_event_id,
    assignment_event_id,
    event_id,
    event_json,
    event_key,
    format_rfc3339,
    merge_event_id,
    parse_event,
    parse_rfc3339,
    stored_json,
)

POS = SourcePosition(topic="news", partition=2, offset=123, ts="2024-05-01T12:00:00Z")


def _born(**overrides: object) -> ClusterBorn:
    fields: dict[str, object] = {
        "namespace": "news",
        "model": "dpmm",
        "cluster_id": "c-42",
        "founding_doc_id": "d1",
        "born_at": POS,
        "confirmed_at": SourcePosition(topic="news", partition=2, offset=130),
        "size": 5,
        "top_terms": [("quake", 0.12), ("tsunami", 0.05)],
        "exemplar_doc_ids": ["d1", "d3"],
        "novelty_score": 7.3,
    }
    fields.update(overrides)
    return ClusterBorn.model_validate(fields)


def test_invalid_reason_values_are_the_fixed_enum() -> None:
    assert {r.value for r in InvalidReason} == {
        "undecodable",
        "not_json",
        "not_object",
        "missing_id",
        "bad_id",
        "bad_field",
        "no_content",
        "empty_content",
        "oversize",
        "nan_embedding",
        "wrong_dimension",
    }
    assert InvalidReason("not_json") is InvalidReason.NOT_JSON
    assert f"{InvalidReason.OVERSIZE}" == "oversize"


def test_document_defaults_and_fields() -> None:
    doc = Document(id="a", text="hello")
    assert doc.tokens is None and doc.embedding is None and doc.label is None
    assert doc.context == {}
    assert doc.ts is None
    full = Document(
        id="b",
        tokens=["x", "y"],
        embedding=[1, 0.5],
        label="sports",
        context={"source": "ap"},
        ts=1700000000,
    )
    assert full.embedding == [1.0, 0.5]
    assert isinstance(full.ts, float) and full.ts == 1700000000.0


def test_document_is_frozen() -> None:
    doc = Document(id="a", text="hello")
    with pytest.raises(ValidationError):
        doc.text = "changed"  # type: ignore[misc]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"id": "a"},  # no content
        {"id": "", "text": "x"},
        {"id": "x" * 257, "text": "x"},
        {"id": 5, "text": "x"},  # strict: no int → str coercion in the model
        {"id": "a", "tokens": ["ok", 3]},
        {"id": "a", "embedding": [float("nan")]},
        {"id": "a", "embedding": [float("inf")]},
        {"id": "a", "text": "x", "context": {"k": 1}},
        {"id": "a", "text": "x", "ts": "not a time"},
        {"id": "a", "text": "x", "ts": True},
        {"id": "a", "text": "x", "ts": float("nan")},
        {"id": "a", "text": "x", "unknown": 1},
    ],
)
def test_document_rejects_contract_violations(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        Document.model_validate(kwargs)


def test_document_id_length_boundary() -> None:
    assert Document(id="x" * 256, text="t").id == "x" * 256


def test_document_converts_rfc3339_ts() -> None:
    doc = Document.model_validate({"id": "a", "text": "x", "ts": "2024-01-01T00:00:00Z"})
    assert doc.ts == datetime(2024, 1, 1, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1970-01-01T00:00:00Z", 0.0),
        ("1970-01-01t00:00:00z", 0.0),
        ("1970-01-01 00:00:00Z", 0.0),
        ("1970-01-01T00:00:00", 0.0),  # no offset: read as UTC
        ("1970-01-01T01:00:00+01:00", 0.0),
        ("1969-12-31T23:30:00-00:30", 0.0),
        ("1970-01-01T00:00:01.25Z", 1.25),
        ("1970-01-01T00:00:00.123456789Z", 0.123456789),
        ("2016-12-31T23:59:60Z", datetime(2017, 1, 1, tzinfo=UTC).timestamp()),
    ],
)
def test_parse_rfc3339(text: str, expected: float) -> None:
    assert parse_rfc3339(text) == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "2024-01-01",
        "2024-13-01T00:00:00Z",
        "2024-02-30T00:00:00Z",
        "2024-01-01T25:00:00Z",
        "2024-01-01T00:00:00+24:00",
        "2024-01-01T00:00:00+0100",
        "0000-01-01T00:00:00Z",
        "2024-01-01T00:00:00Z trailing",
        "٢٠٢٤-01-01T00:00:00Z",  # non-ASCII digits
        "1700000000",
    ],
)
def test_parse_rfc3339_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_rfc3339(text)


def test_format_rfc3339_round_trips() -> None:
    assert format_rfc3339(0.0) == "1970-01-01T00:00:00.000Z"
    assert parse_rfc3339(format_rfc3339(1700000000.5)) == 1700000000.5


def test_source_position_defaults() -> None:
    pos = SourcePosition(topic="-", offset=7)
    assert (pos.partition, pos.ts) == (0, None)
    assert json.loads(pos.model_dump_json()) == {
        "topic": "-",
        "partition": 0,
        "offset": 7,
        "ts": None,
    }


def test_event_id_is_truncated_sha256_of_the_key() -> None:
    expected = hashlib.sha256(b"news\x00c-42\x00cluster.born").hexdigest()[:32]
    assert event_id("news", "c-42", "cluster.born") == expected
    assert len(expected) == 32
    assert event_id("news", "c-42", "cluster.retired") != expected
    assert event_id("news", "c-4", "2cluster.born") != expected  # separator matters
    assert event_id("other", "c-42", "cluster.born") != expected


def test_cluster_born_serializes_as_design_contract() -> None:
    born = _born()
    data = json.loads(born.model_dump_json())
    assert list(data) == [
        "event_id",
        "type",
        "schema_version",
        "namespace",
        "model",
        "cluster_id",
        "founding_doc_id",
        "born_at",
        "confirmed_at",
        "size",
        "top_terms",
        "exemplar_doc_ids",
        "novelty_score",
        "nearest_known_label",
    ]
    assert data["type"] == "cluster.born"
    assert data["schema_version"] == 1
    assert data["event_id"] == event_id("news", "c-42", "cluster.born")
    assert data["top_terms"] == [["quake", 0.12], ["tsunami", 0.05]]
    assert data["born_at"] == {
        "topic": "news",
        "partition": 2,
        "offset": 123,
        "ts": "2024-05-01T12:00:00Z",
    }
    assert data["nearest_known_label"] is None


def test_event_id_is_derived_unless_given() -> None:
    assert _born().event_id == _born().event_id  # replay → same id
    assert _born(cluster_id="c-43").event_id != _born().event_id
    assert _born(event_id="explicit").event_id == "explicit"
    assert _born(event_id="").event_id == event_id("news", "c-42", "cluster.born")


def test_retired_and_merged_events() -> None:
    retired = ClusterRetired(
        namespace="news", model="dpmm", cluster_id="c1", retired_at=POS, size=0.4, reason="faded"
    )
    merged = ClusterMerged(namespace="news", model="svi", cluster_id="c1", into="c0", merged_at=POS)
    assert retired.event_id == event_id("news", "c1", "cluster.retired")
    assert merged.event_id == merge_event_id("news", "c1", "c0")  # the pair names the merge
    other = ClusterMerged(namespace="news", model="svi", cluster_id="c1", into="c2", merged_at=POS)
    assert other.event_id != merged.event_id
    assert json.loads(retired.model_dump_json())["reason"] == "faded"
    assert json.loads(merged.model_dump_json())["into"] == "c0"
    with pytest.raises(ValidationError):
        ClusterRetired.model_validate({**retired.model_dump(), "reason": "bored", "event_id": "x"})


def test_parse_event_round_trips_each_type() -> None:
    events = [
        _born(nearest_known_label="world"),
        ClusterRetired(
            namespace="n", model="dpmm", cluster_id="c1", retired_at=POS, size=1.5, reason="evicted"
        ),
        ClusterMerged(namespace="n", model="dpmm", cluster_id="c1", into="c2", merged_at=POS),
        DocumentAssigned(
            event_id=assignment_event_id("n", POS),
            namespace="n",
            model="hdp",
            cluster_id="c3",
            doc_id="d9",
            position=POS,
            label="world",
        ),
        DocumentsAssigned(
            event_id=assignment_batch_event_id("n", POS.topic, POS.partition, POS.offset),
            namespace="n",
            model="dpmm",
            topic=POS.topic,
            partition=POS.partition,
            first_offset=POS.offset,
            last_offset=POS.offset + 2,
            assignments=[
                Assignment(doc_id="d1", offset=POS.offset, cluster_id="c1"),
                Assignment(doc_id="d2", offset=POS.offset + 2, ts=POS.ts, cluster_id="c2"),
            ],
        ),
    ]
    for ev in events:
        back = parse_event(ev.model_dump_json())
        assert type(back) is type(ev)
        assert back == ev
    with pytest.raises(ValidationError):
        parse_event('{"type": "cluster.exploded"}')


def test_event_type_cannot_be_overridden() -> None:
    with pytest.raises(ValidationError):
        _born(type="cluster.retired")


def test_assignment_ids_are_per_record_and_namespace() -> None:
    """One id per input record (topic, partition, offset), whatever its cluster."""
    other = SourcePosition(topic=POS.topic, partition=POS.partition, offset=POS.offset + 1)
    ids = {
        assignment_event_id("n", POS),
        assignment_event_id("n", other),
        assignment_event_id("m", POS),
        assignment_event_id("n", SourcePosition(topic=POS.topic, partition=1, offset=POS.offset)),
    }
    assert len(ids) == 4 and all(len(i) == 32 for i in ids)


def test_event_json_is_compact_ascii_and_round_trips() -> None:
    ev = {"event_id": "e", "type": "cluster.born", "top_terms": [["séisme", 0.5]], "n": 2**70}
    text = event_json(ev)  # 2**70 is beyond orjson: the stdlib encodes this one
    assert text.isascii() and " " not in text and json.loads(text) == ev
    plain = {"event_id": "e", "type": "cluster.born", "size": 3, "score": 1.5}
    assert event_json(plain) == json.dumps(plain, separators=(",", ":"))


def test_a_stored_event_keeps_its_text_for_the_sinks() -> None:
    text = event_json({"event_id": "e", "label": "zoë"})
    ev = StoredEvent.parse(text.encode())
    assert ev == {"event_id": "e", "label": "zoë"} and ev.raw == text
    assert stored_json(ev) == text
    assert stored_json({"event_id": "e"}) == '{"event_id":"e"}'


def test_event_keys_keep_a_cluster_or_an_input_partition_in_order() -> None:
    assert event_key({"type": "cluster.born", "cluster_id": "c7"}) == "c7"
    batch = {"type": "documents.assigned", "topic": "news", "partition": 3}
    assert event_key(batch) == "news:3"


def test_assignment_batch_ids_are_per_partition_and_first_offset() -> None:
    ids = {
        assignment_batch_event_id("n", "t", 0, 10),
        assignment_batch_event_id("n", "t", 1, 10),
        assignment_batch_event_id("n", "t", 0, 11),
        assignment_batch_event_id("n", "u", 0, 10),
        assignment_batch_event_id("m", "t", 0, 10),
    }
    assert len(ids) == 5 and all(len(i) == 32 for i in ids)


def test_a_decoded_document_is_the_fields_of_a_document_and_validates_as_one() -> None:
    doc = Document(
        id="a", text="x", tokens=["t"], label="l", context={"c": "v"}, ts="1970-01-01T00:00:01Z"
    )
    decoded = DecodedDocument.of(doc)
    assert (decoded.id, decoded.tokens, decoded.context, decoded.ts) == (
        "a",
        ["t"],
        {"c": "v"},
        1.0,
    )
    assert decoded.validated() == doc
    with pytest.raises(ValidationError, match="at least one of text, tokens, embedding"):
        DecodedDocument(id="b").validated()


def test_a_position_at_is_the_validated_position() -> None:
    pos = SourcePosition.at("in.jsonl", 0, 7)
    assert pos == SourcePosition(topic="in.jsonl", offset=7) and pos.ts is None
    with pytest.raises(ValidationError):
        SourcePosition.at("in.jsonl", 0, "seven")  # type: ignore[arg-type]
