"""``events.assignments``: one ``document.assigned`` event per valid document (or one
``documents.assigned`` per batch and input partition), carrying the cluster the model seated it
in, through the same outbox as the cluster events."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

import noveld.daemon.stages.events as pipeline_module
from noveld.daemon.embedded import run_file
from noveld.daemon.evaluate import StreamRecorder
from noveld.daemon.settings import Settings, load_settings
from noveld.daemon.sinks import CollectingEvents
from noveld.schema import (
    DocumentAssigned,
    DocumentsAssigned,
    assignment_batch_event_id,
    assignment_event_id,
    parse_event,
)


def write_stream(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def settings_for(tmp_path: Path, **overrides: Any) -> Settings:
    base: dict[str, Any] = {"dlq": str(tmp_path / "dlq.jsonl"), "events": {"assignments": True}}
    base.update(overrides)
    return load_settings(None, base)


def run(settings: Settings, path: Path) -> tuple[list[dict[str, Any]], StreamRecorder]:
    sink, rec = CollectingEvents(), StreamRecorder()
    code, _, _ = run_file(settings, str(path), events_sink=sink, observer=rec, snapshot=False)
    assert code == 0
    return sink.events, rec


STORIES = [
    "volcano eruption ash cloud flights grounded",
    "election ballot count vote recount",
    "football final penalty shootout cup",
]


def story_rows(n: int) -> list[dict[str, Any]]:
    return [
        {"id": f"d{i}", "text": STORIES[i % 3] + f" extra{i % 5}", "ts": 1_700_000_000 + i}
        for i in range(n)
    ]


def test_every_valid_document_gets_its_cluster_and_invalid_ones_none(tmp_path: Path) -> None:
    rows: list[Any] = story_rows(40)
    rows.insert(7, {"id": "empty", "text": ""})  # empty content → DLQ, no assignment
    rows.insert(20, {"text": "no id here"})  # missing id → DLQ
    path = write_stream(tmp_path / "in.jsonl", rows)
    events, rec = run(settings_for(tmp_path, batch={"max_docs": 16}), path)
    assigned = [e for e in events if e["type"] == "document.assigned"]
    assert [e["doc_id"] for e in assigned] == rec.ids == [f"d{i}" for i in range(40)]
    assert [e["cluster_id"] for e in assigned] == [f"c{u}" for u in rec.clusters]
    assert [e["position"]["offset"] for e in assigned] == rec.offsets
    assert len({e["event_id"] for e in assigned}) == 40
    for e in assigned:
        ev = parse_event(json.dumps(e))  # the hot path's dicts are valid schema events
        assert isinstance(ev, DocumentAssigned) and ev.model_dump(mode="json") == e
        assert ev.event_id == assignment_event_id("default", ev.position)
        assert ev.position.ts is not None and ev.label is None
    # three stories, three clusters; each born cluster's members are announced to consumers
    born = {e["cluster_id"] for e in events if e["type"] == "cluster.born"}
    assert born <= {e["cluster_id"] for e in assigned}
    assert len({e["cluster_id"] for e in assigned}) == 3


def test_off_by_default(tmp_path: Path) -> None:
    path = write_stream(tmp_path / "in.jsonl", story_rows(30))
    events, _ = run(load_settings(None, {"dlq": str(tmp_path / "dlq.jsonl")}), path)
    assert events and all(e["type"] != "document.assigned" for e in events)


def test_known_category_assignments_carry_the_label(tmp_path: Path) -> None:
    rows = story_rows(30)
    for r in rows[:6]:
        r["label"] = {0: "volcanoes", 1: "elections", 2: "sport"}[int(r["id"][1:]) % 3]
    path = write_stream(tmp_path / "in.jsonl", rows)
    events, _ = run(settings_for(tmp_path, model={"use_labels": True}), path)
    assigned = [e for e in events if e["type"] == "document.assigned"]
    assert len(assigned) == 30
    by_story = {i % 3: e["label"] for i, e in enumerate(assigned)}
    assert by_story == {0: "volcanoes", 1: "elections", 2: "sport"}
    assert all(e["label"] == by_story[i % 3] for i, e in enumerate(assigned))


@pytest.mark.parametrize("model", ["dpmm", "svi", "hdp"])
def test_a_replay_emits_the_same_assignment_events(tmp_path: Path, model: str) -> None:
    """Consumers deduplicate on event_id: a re-processed input gives identical events."""
    path = write_stream(tmp_path / "in.jsonl", story_rows(60))
    runs = [
        run(settings_for(tmp_path, model={"kind": model}, batch={"max_docs": 16}), path)[0]
        for _ in range(2)
    ]
    a, b = ([e for e in r if e["type"] == "document.assigned"] for r in runs)
    assert len(a) == 60 and a == b


def batch_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "documents.assigned"]


def test_assignment_batches_carry_the_same_seats_as_per_document_events(tmp_path: Path) -> None:
    """``"batch"``: one ``documents.assigned`` per batch (one input partition here), the same
    documents, offsets, times and clusters as the per-document events, in input order."""
    rows: list[Any] = story_rows(40)
    rows.insert(7, {"id": "empty", "text": ""})  # a dead letter: in neither form
    path = write_stream(tmp_path / "in.jsonl", rows)
    single, _ = run(settings_for(tmp_path, batch={"max_docs": 16}), path)
    batched, rec = run(
        settings_for(tmp_path, batch={"max_docs": 16}, events={"assignments": "batch"}), path
    )
    per_doc = [e for e in single if e["type"] == "document.assigned"]
    groups = batch_events(batched)
    assert len(groups) == 3  # 41 records in batches of 16: 16, 16, 9
    seats = [a for g in groups for a in g["assignments"]]
    assert [(a["doc_id"], a["offset"], a["ts"], a["cluster_id"], a["label"]) for a in seats] == [
        (e["doc_id"], e["position"]["offset"], e["position"]["ts"], e["cluster_id"], e["label"])
        for e in per_doc
    ]
    assert [a["cluster_id"] for a in seats] == [f"c{u}" for u in rec.clusters]
    for g in groups:
        ev = parse_event(json.dumps(g))  # the hot path's dicts are valid schema events
        assert isinstance(ev, DocumentsAssigned) and ev.model_dump(mode="json") == g
        assert (ev.first_offset, ev.last_offset) == (
            ev.assignments[0].offset,
            ev.assignments[-1].offset,
        )
        assert ev.event_id == assignment_batch_event_id(
            "default", ev.topic, ev.partition, ev.first_offset
        )
    first = groups[0]  # records 0-15, of which 7 went to the DLQ
    assert (first["first_offset"], first["last_offset"], len(first["assignments"])) == (0, 15, 15)
    # the cluster events are unchanged; no per-document events in batch mode
    assert [e for e in batched if e["type"] != "documents.assigned"] == [
        e for e in single if e["type"] != "document.assigned"
    ]


def test_a_large_batch_is_split_into_messages_of_bounded_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pipeline_module, "ASSIGNMENTS_PER_MESSAGE", 7)
    path = write_stream(tmp_path / "in.jsonl", story_rows(40))
    events, _ = run(
        settings_for(tmp_path, batch={"max_docs": 32}, events={"assignments": "batch"}), path
    )
    sizes = [len(e["assignments"]) for e in batch_events(events)]
    assert sizes == [7, 7, 7, 7, 4, 7, 1]  # batches of 32 and 8
    offsets = [a["offset"] for e in batch_events(events) for a in e["assignments"]]
    assert offsets == list(range(40))
    assert len({e["event_id"] for e in batch_events(events)}) == len(sizes)


@pytest.mark.parametrize(
    ("value", "mode"),
    [(True, "document"), (False, "off"), ("true", "document"), ("0", "off"), ("batch", "batch")],
)
def test_the_boolean_form_of_the_setting_still_works(value: Any, mode: str) -> None:
    assert load_settings(None, {"events": {"assignments": value}}).events.assignments == mode


def test_an_unknown_assignment_mode_is_refused() -> None:
    with pytest.raises(ValidationError, match="document"):
        load_settings(None, {"events": {"assignments": "sometimes"}})
