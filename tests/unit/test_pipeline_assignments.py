"""``events.assignments``: one ``document.assigned`` event per valid document, carrying the
cluster the model seated it in, through the same outbox as the cluster events."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from noveld.daemon.embedded import CollectingEvents, run_file
from noveld.daemon.settings import Settings, load_settings
from noveld.eval.report import StreamRecorder
from noveld.schema import DocumentAssigned, assignment_event_id, parse_event


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
