"""A dead-letter sink that cannot take a batch's dead letters (the Kafka DLQ topic is gone) stops
the run with a message and exit 1 before the batch is committed — it crashed with a traceback —
and the Kafka sink reports the broker's refusal as DeadLettersFailed."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from kafka.errors import KafkaTimeoutError

from noveld.connectors.errors import DeadLettersFailed
from noveld.connectors.jsonl import Record
from noveld.connectors.kafka_sinks import KafkaDeadLetters
from noveld.daemon.exits import EXIT_IO
from noveld.daemon.pipeline import Pipeline
from noveld.daemon.progress import Progress
from noveld.daemon.settings import load_settings
from noveld.daemon.sinks import CollectingEvents
from noveld.daemon.stepping import step_or_stop
from noveld.schema import InvalidReason, SourcePosition
from noveld.state.memory import MemoryStore


class GoneTopic:
    """Dead letters are taken, then the broker refuses them at the flush."""

    def __init__(self) -> None:
        self.sent = 0

    def send(self, *args: object) -> None:
        self.sent += 1

    def flush(self) -> None:
        raise DeadLettersFailed("DLQ topic gone: KafkaTimeoutError('Failed to update metadata')")


def records(lines: list[str]) -> list[Record]:
    return [
        Record(line.encode(), SourcePosition(topic="in", partition=0, offset=i))
        for i, line in enumerate(lines)
    ]


def test_a_batch_whose_dead_letters_fail_is_not_committed() -> None:
    settings = load_settings(None, {"namespace": "t"})
    store = MemoryStore(None)
    sink = GoneTopic()
    pipe = Pipeline(settings, store, CollectingEvents(), sink)
    recs = records([json.dumps({"id": "a", "text": "x y"}), "not json"])
    out = io.StringIO()
    code = step_or_stop(pipe, recs, {"in:0": 0}, {"in:0": 2}, Progress(None, 1.0), out, "")
    assert code == EXIT_IO and sink.sent == 1
    assert "cannot write dead letters (DLQ topic gone" in out.getvalue()
    assert "Does the DLQ topic exist?" in out.getvalue()
    assert pipe.state.offsets.get("in:0", 0) == 0  # not committed: the next start reads it again
    assert pipe.state.counters.get("docs", 0) == 0


def test_the_kafka_sink_reports_a_refused_dead_letter(monkeypatch: pytest.MonkeyPatch) -> None:
    sink = KafkaDeadLetters.__new__(KafkaDeadLetters)  # no broker: only the error path
    sink.topic, sink.max_value_bytes, sink.count, sink._sent = "dlq", 100, 0, []

    class Refusing:
        def send(self, *args: Any, **kw: Any) -> None:
            raise KafkaTimeoutError("Failed to update metadata after 10.0 secs.")

    sink.producer = Refusing()
    rec = records(["oops"])[0]
    with pytest.raises(DeadLettersFailed, match="DLQ topic dlq: KafkaTimeoutError"):
        sink.send(rec, InvalidReason.NOT_JSON, "not json")
    assert sink.count == 0
