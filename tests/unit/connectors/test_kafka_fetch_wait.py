"""``kafka.fetch_max_wait_ms`` reaches the input consumer: on a broker that holds each fetch for
its whole wait, it bounds how long each document waits before it is read."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import ValidationError

import noveld.connectors.kafka_source as kafka_mod
from noveld.connectors.kafka_source import KafkaSource
from noveld.daemon.settings import load_settings


class RecordsConfig:
    """A consumer that keeps the configuration it was made with."""

    def __init__(self, **config: Any) -> None:
        self.config = config

    def subscribe(self, topics: Sequence[str], listener: Any) -> None:
        pass


def source(monkeypatch: pytest.MonkeyPatch, **given: Any) -> KafkaSource:
    monkeypatch.setattr(kafka_mod, "KafkaConsumer", RecordsConfig)
    return KafkaSource("b:9092", "docs", "g", lambda k: 0, lambda k: None, lambda k: None, **given)


def test_the_consumer_waits_as_long_as_told(monkeypatch: pytest.MonkeyPatch) -> None:
    assert source(monkeypatch, fetch_max_wait_ms=40).consumer.config["fetch_max_wait_ms"] == 40


def test_by_default_it_waits_a_fifth_of_kafka_clients_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert source(monkeypatch).consumer.config["fetch_max_wait_ms"] == 100
    assert load_settings(None, {}).kafka.fetch_max_wait_ms == 100


def test_the_setting_comes_from_the_environment_and_must_be_positive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NOVELD_KAFKA__FETCH_MAX_WAIT_MS", "40")
    assert load_settings(None, {}).kafka.fetch_max_wait_ms == 40
    with pytest.raises(ValidationError, match="fetch_max_wait_ms"):
        load_settings(None, {"kafka": {"fetch_max_wait_ms": 0}})
