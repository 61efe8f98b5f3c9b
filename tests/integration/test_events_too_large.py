"""An event no broker will take (larger than the producer's ``max_request_size``) must not
hold every later event in the outbox: the sink sends the others and names it as refused."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from helpers.kafka_runs import consume_all
from servers.kafka_broker import KafkaBroker

from noveld.connectors.errors import EventsRefused
from noveld.connectors.kafka_sinks import KafkaEvents

pytestmark = pytest.mark.integration


def event(event_id: str, cluster: str, note: str) -> dict[str, Any]:
    return {"type": "cluster.retired", "event_id": event_id, "cluster_id": cluster, "note": note}


def test_the_sink_sends_the_others_and_names_the_event_too_large(
    kafka_broker: KafkaBroker, kafka_bootstrap: str
) -> None:
    topic = f"events-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic)
    sink = KafkaEvents(kafka_bootstrap, topic, {"max_request_size": 20_000})
    try:
        batch = [event("e1", "c1", "small"), event("e2", "c2", "x" * 50_000),
                 event("e3", "c3", "small too")]  # fmt: skip
        with pytest.raises(EventsRefused) as refused:
            sink.publish(batch)
        assert list(refused.value.refused) == ["e2"]
        assert "bytes" in refused.value.refused["e2"]
    finally:
        sink.close()
    got = [json.loads(m.value) for m in consume_all(kafka_bootstrap, topic, 2)]
    assert sorted(e["event_id"] for e in got) == ["e1", "e3"]
