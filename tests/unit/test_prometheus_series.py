"""What the daemon's Prometheus registry exports between batches: the lag series of the
partitions a replica owns (and no others), and a dead-letter series for every reason."""

from __future__ import annotations

from prometheus_client import generate_latest

from noveld.daemon.metrics import Metrics
from noveld.daemon.pipeline import event_time
from noveld.schema import Document, InvalidReason, SourcePosition


def exported(m: Metrics) -> str:
    return generate_latest(m.registry).decode()


def test_lag_series_of_partitions_no_longer_owned_are_removed() -> None:
    """A stale copy of a revoked partition's lag was summed twice by the lag alert."""
    m = Metrics("dpmm")
    m.set_lag({"docs:0": 5, "docs:1": 7})
    m.set_lag({"docs:1": 2})  # a rebalance took partition 0 away
    text = exported(m)
    assert 'noveld_consumer_lag_messages{partition="1",topic="docs"} 2.0' in text
    assert 'partition="0"' not in text
    m.set_lag({})  # no partitions at all
    assert "noveld_consumer_lag_messages{" not in exported(m)


def test_every_dead_letter_reason_is_exported_from_the_start() -> None:
    text = exported(Metrics("dpmm"))
    for reason in InvalidReason:
        assert f'noveld_dlq_messages_total{{reason="{reason}"}} 0.0' in text


def test_an_events_time_is_the_documents_own_before_the_records() -> None:
    """An archive replayed into Kafka keeps its event times (docs/events.md)."""
    pos = SourcePosition(topic="t", partition=0, offset=3, ts="2026-11-24T13:07:08.248Z")
    dated = Document(id="a", text="x", ts=1700000000.539)
    assert event_time(pos, dated) == "2023-11-14T22:13:20.539Z"
    assert event_time(pos, Document(id="b", text="x")) == "2026-11-24T13:07:08.248Z"
