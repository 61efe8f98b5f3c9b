"""kafka-python's own log while a client starts: quiet during the start, kept quiet after a
failed start (its IO thread goes on logging the failed attempts), restored once one starts."""

from __future__ import annotations

import logging

import pytest

from noveld.connectors.kafka_client import start_within

KAFKA_LOG = logging.getLogger("kafka")


def _fail() -> object:
    raise ConnectionError("unreachable")


def test_a_failed_start_keeps_kafkas_log_quiet_until_a_client_starts() -> None:
    KAFKA_LOG.setLevel(logging.INFO)
    try:
        with pytest.raises(ConnectionError):
            start_within(_fail, "consumer", timeout_s=5)
        assert KAFKA_LOG.level == logging.CRITICAL
        with pytest.raises(ConnectionError):
            start_within(_fail, "producer", timeout_s=5)
        assert KAFKA_LOG.level == logging.CRITICAL
        assert start_within(lambda: "client", "consumer", timeout_s=5) == "client"
        assert KAFKA_LOG.level == logging.INFO
    finally:
        KAFKA_LOG.setLevel(logging.NOTSET)


def test_a_successful_start_leaves_kafkas_level_as_it_was() -> None:
    KAFKA_LOG.setLevel(logging.WARNING)
    try:
        assert start_within(lambda: 7, "admin", timeout_s=5) == 7
        assert KAFKA_LOG.level == logging.WARNING
    finally:
        KAFKA_LOG.setLevel(logging.NOTSET)
