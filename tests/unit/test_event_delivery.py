"""Event delivery that fails for a while: the daemon keeps running, the events stay in the
outbox (reported as pending) and go out, each once more at most, when the sink recovers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from noveld.connectors.errors import DeliveryFailed
from noveld.connectors.jsonl import Record
from noveld.daemon.pipeline import Pipeline
from noveld.daemon.settings import load_settings
from noveld.schema import SourcePosition
from noveld.state.memory import MemoryStore


class FlakySink:
    def __init__(self) -> None:
        self.down = True
        self.delivered: list[dict[str, Any]] = []

    def publish(self, events: list[dict[str, Any]]) -> None:
        if self.down:
            raise DeliveryFailed("broker unreachable")
        self.delivered.extend(events)


class NoDlq:
    def send(self, *args: object) -> None:
        raise AssertionError("no dead letters expected")

    def flush(self) -> None:
        pass


def test_events_wait_in_the_outbox_until_the_sink_recovers(tmp_path: Path) -> None:
    settings = load_settings(None, {"dlq": str(tmp_path / "d.jsonl"),
                                    "novelty": {"min_size": 2}})  # fmt: skip
    sink = FlakySink()
    pipe = Pipeline(settings, MemoryStore(None), sink, NoDlq())
    texts = ["volcano eruption ash cloud"] * 4 + ["election vote count ballot"] * 4
    recs = [Record(json.dumps({"id": f"d{i}", "text": t}).encode(),
                   SourcePosition(topic="f", partition=0, offset=i))
            for i, t in enumerate(texts)]  # fmt: skip
    rep = pipe.step(recs[:4], {"f:0": 0}, {"f:0": 4})
    assert rep.births == 1 and rep.outbox_pending == 1 and sink.delivered == []
    sink.down = False
    rep = pipe.step(recs[4:], {"f:0": 4}, {"f:0": 8})
    assert rep.outbox_pending == 0
    ids = [e["event_id"] for e in sink.delivered]
    assert len(ids) == 2 == len(set(ids))  # the held-back birth and the new one, once each
