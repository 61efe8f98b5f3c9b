"""Event delivery that fails for a while: the daemon keeps running, the events stay in the
outbox (reported as pending) and go out, each once more at most, when the sink recovers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from doubles import NoDlq

import noveld.daemon.stages.outbox as pipeline_mod
from noveld.connectors.errors import DeliveryFailed, EventsRefused
from noveld.connectors.jsonl import Record
from noveld.daemon.metrics import Metrics
from noveld.daemon.pipeline import Pipeline
from noveld.daemon.settings import load_settings
from noveld.schema import SourcePosition
from noveld.state.memory import MemoryStore


@pytest.fixture(autouse=True)
def retry_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about what is delivered when; the pause between attempts on a pending
    outbox has its own test (it sets it back)."""
    monkeypatch.setattr(pipeline_mod, "DELIVERY_RETRY_S", 0.0)


class FlakySink:
    def __init__(self) -> None:
        self.down = True
        self.delivered: list[dict[str, Any]] = []

    def publish(self, events: list[dict[str, Any]]) -> None:
        if self.down:
            raise DeliveryFailed("broker unreachable")
        self.delivered.extend(events)


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


class LaggingReplicas(MemoryStore):
    """A store whose replicas have not acknowledged the commits while ``behind``."""

    def __init__(self) -> None:
        super().__init__(None)
        self.behind = True

    def replicated(self) -> bool:
        return not self.behind


def records(texts: list[str]) -> list[Record]:
    return [Record(json.dumps({"id": f"d{i}", "text": t}).encode(),
                   SourcePosition(topic="f", partition=0, offset=i))
            for i, t in enumerate(texts)]  # fmt: skip


def test_events_wait_for_the_replicas_and_go_on_an_idle_turn(tmp_path: Path) -> None:
    """Events of commits the replicas do not hold yet stay in the outbox (reported, and in the
    metrics); commits go on; once the replicas catch up an idle turn delivers them, without
    waiting for more input."""
    settings = load_settings(None, {"dlq": str(tmp_path / "d.jsonl"),
                                    "novelty": {"min_size": 2}})  # fmt: skip
    sink, store = FlakySink(), LaggingReplicas()
    sink.down = False
    pipe = Pipeline(settings, store, sink, NoDlq())
    metrics = Metrics("dpmm")
    recs = records(["volcano eruption ash cloud"] * 4 + ["election vote count ballot"] * 4)
    rep = pipe.step(recs[:4], {"f:0": 0}, {"f:0": 4})
    metrics.observe(rep)
    assert rep.births == 1 and rep.outbox_pending == 1 and rep.held_for_replicas
    assert sink.delivered == [] and pipe.state.offsets == {"f:0": 4}  # committed all the same
    assert metrics.held._value.get() == 1 and metrics.outbox._value.get() == 1
    rep = pipe.step(recs[4:], {"f:0": 4}, {"f:0": 8})
    assert rep.outbox_pending == 2 and sink.delivered == []
    assert pipe.retry_pending() == 2  # still behind: nothing goes
    store.behind = False
    assert pipe.retry_pending() == 0 and not pipe.held_for_replicas  # an idle turn sends them
    assert len({e["event_id"] for e in sink.delivered}) == 2 == len(sink.delivered)
    metrics.set_outbox(0, pipe.held_for_replicas)
    assert metrics.held._value.get() == 0
    assert pipe.retry_pending() == 0 and len(sink.delivered) == 2  # nothing pending: no resend


def test_an_idle_turn_retries_a_sink_that_was_down(tmp_path: Path) -> None:
    settings = load_settings(None, {"dlq": str(tmp_path / "d.jsonl"),
                                    "novelty": {"min_size": 2}})  # fmt: skip
    sink = FlakySink()
    pipe = Pipeline(settings, MemoryStore(None), sink, NoDlq())
    rep = pipe.step(records(["volcano eruption ash cloud"] * 4), {"f:0": 0}, {"f:0": 4})
    assert rep.outbox_pending == 1 and not rep.held_for_replicas
    assert pipe.retry_pending() == 1  # still down
    sink.down = False
    assert pipe.retry_pending() == 0 and len(sink.delivered) == 1


class CountingReads(LaggingReplicas):
    """Counts how often the outbox is read."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def outbox_pending(self) -> list[dict[str, Any]]:
        self.reads += 1
        return super().outbox_pending()


def test_a_held_outbox_is_counted_not_read_every_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Events held for the replicas pile up in the outbox; reading all of it after every commit
    made each batch slower than the last. While events are pending the outbox is read at most
    every DELIVERY_RETRY_S; the events of each commit are counted meanwhile, and the count is
    exact once it is read again."""
    monkeypatch.setattr(pipeline_mod, "DELIVERY_RETRY_S", 3600.0)
    settings = load_settings(None, {"dlq": str(tmp_path / "d.jsonl"),
                                    "novelty": {"min_size": 2}})  # fmt: skip
    sink, store = FlakySink(), CountingReads()
    sink.down = False
    pipe = Pipeline(settings, store, sink, NoDlq())
    stories = [
        "volcano eruption ash cloud",
        "election ballot count vote",
        "harbour strike dock union",
        "comet orbit tail sky",
        "glacier melt ice sea",
    ]
    texts = [t for t in stories for _ in range(4)]
    recs = records(texts)
    reads_at_start = store.reads
    pending = []
    for i in range(0, len(recs), 4):
        pending.append(pipe.step(recs[i : i + 4], {"f:0": i}, {"f:0": i + 4}).outbox_pending)
    assert pending == [1, 2, 3, 4, 5]  # one birth per story, counted
    assert store.reads - reads_at_start == 1  # read once (the first attempt), not five times
    store.behind = False
    assert pipe.retry_pending() == 5  # within the pause: not read, not sent
    monkeypatch.setattr(pipeline_mod, "DELIVERY_RETRY_S", 0.0)
    pipe._next_attempt = 0.0
    assert pipe.retry_pending() == 0 and len(sink.delivered) == 5


class OneTooLarge:
    """A sink that takes every event but the first of each call, which is too large for it."""

    def __init__(self) -> None:
        self.delivered: list[dict[str, Any]] = []
        self.refused: list[str] = []

    def publish(self, events: list[dict[str, Any]]) -> None:
        self.delivered.extend(events[1:])
        self.refused.append(events[0]["event_id"])
        raise EventsRefused({events[0]["event_id"]: "2,000,000 bytes: too large"})


def test_an_event_the_sink_refuses_for_good_does_not_hold_the_others(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The refused event is dropped from the outbox (logged, counted in the metric); events
    after it are not held behind it."""
    settings = load_settings(None, {"dlq": str(tmp_path / "d.jsonl"),
                                    "novelty": {"min_size": 2}})  # fmt: skip
    sink = OneTooLarge()
    pipe = Pipeline(settings, MemoryStore(None), sink, NoDlq())
    metrics = Metrics("dpmm")
    texts = ["volcano eruption ash cloud"] * 4 + ["election vote count ballot"] * 4
    recs = records(texts + ["flood river levee rain"] * 4)
    for lo, hi in ((0, 4), (4, 12)):
        rep = pipe.step(recs[lo:hi], {"f:0": lo}, {"f:0": hi})
        metrics.observe(rep)
        assert rep.outbox_pending == 0
    assert len(sink.refused) == 2 and pipe.refused_events == 2
    assert sink.delivered and not {e["event_id"] for e in sink.delivered} & set(sink.refused)
    assert sum("can never be delivered" in r.getMessage() for r in caplog.records) == 2
    assert metrics.registry.get_sample_value("noveld_events_refused_total") == 2


def test_event_terms_are_cut_to_a_hundred_characters(tmp_path: Path) -> None:
    """A huge token (base64, a URL) cannot make a birth event too large to send."""
    settings = load_settings(None, {"dlq": str(tmp_path / "d.jsonl"),
                                    "novelty": {"min_size": 2}})  # fmt: skip
    sink = FlakySink()
    sink.down = False
    pipe = Pipeline(settings, MemoryStore(None), sink, NoDlq())
    blob = "q" * 5000
    pipe.step(records([f"{blob} volcano ash"] * 4), {"f:0": 0}, {"f:0": 4})
    born = [e for e in sink.delivered if e["type"] == "cluster.born"]
    terms = [t for e in born for t, _ in e["top_terms"]]
    assert born and "q" * 99 + "…" in terms and max(len(t) for t in terms) == 100
