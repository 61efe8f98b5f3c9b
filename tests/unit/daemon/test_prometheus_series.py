"""What the daemon's Prometheus registry exports between batches: the lag series of the
partitions a replica owns (and no others), and a dead-letter series for every reason."""

from __future__ import annotations

import logging
import time

import pytest
from kafka.errors import KafkaTimeoutError
from prometheus_client import generate_latest

from noveld.daemon.metrics import Metrics
from noveld.daemon.pipeline import event_time
from noveld.daemon.stages.report import BatchReport
from noveld.schema import DecodedDocument, InvalidReason, SourcePosition


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


def test_truncated_documents_are_counted_from_zero() -> None:
    """Documents cut to limits.max_doc_tokens are counted (a dashboard shows 0 before any)."""
    m = Metrics("dpmm")
    assert "noveld_documents_truncated_total 0.0" in exported(m)
    m.observe(BatchReport(valid=4, truncated=3))
    assert "noveld_documents_truncated_total 3.0" in exported(m)


def test_an_events_time_is_the_documents_own_before_the_records() -> None:
    """An archive replayed into Kafka keeps its event times (docs/events.md)."""
    pos = SourcePosition(topic="t", partition=0, offset=3, ts="2026-11-24T13:07:08.248Z")
    dated = DecodedDocument(id="a", text="x", ts=1700000000.539)
    assert event_time(pos, dated) == "2023-11-14T22:13:20.539Z"
    assert event_time(pos, DecodedDocument(id="b", text="x")) == "2026-11-24T13:07:08.248Z"


def test_a_broker_that_stops_answering_for_the_lag_is_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A dead broker was silent (kafka-python's own logs reach no one): the first failed lag
    request says so, later ones do not repeat it, an answer says it is back; the last lag
    values stay exported meanwhile."""
    from noveld.daemon.kafka_health import refresh_lag

    class Source:
        def __init__(self) -> None:
            self.lag_failing = False
            self.held: dict[str, object] = {}
            self.answers: list[dict[str, int] | None] = [{"docs:0": 3}, None, None, {"docs:0": 9}]

        def lag(self) -> dict[str, int]:
            answer = self.answers.pop(0)
            self.lag_failing = answer is None  # as KafkaSource.lag sets it
            if answer is None:
                raise KafkaTimeoutError("Failed to get offsets by times in 30000 ms")
            return answer

    m, source = Metrics("dpmm"), Source()
    with caplog.at_level(logging.WARNING, logger="noveld.kafka_mode"):
        refresh_lag(m, source)  # type: ignore[arg-type]
        assert "noveld_kafka_reachable 1.0" in exported(m)
        refresh_lag(m, source)  # type: ignore[arg-type]
        refresh_lag(m, source)  # type: ignore[arg-type]
        assert 'noveld_consumer_lag_messages{partition="0",topic="docs"} 3.0' in exported(m)
        assert "noveld_kafka_reachable 0.0" in exported(m)  # an outage shows, not only in logs
        source.held = {"docs:1": (900, 20)}
        refresh_lag(m, source)  # type: ignore[arg-type]
        assert "noveld_kafka_reachable 1.0" in exported(m)
        assert "noveld_partitions_held 1.0" in exported(m)  # lag 0, yet nothing is read
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2 and "is the broker up?" in said[0] and said[1] == "Kafka answers again"
    assert 'noveld_consumer_lag_messages{partition="0",topic="docs"} 9.0' in exported(m)


def test_before_the_first_commit_the_commit_time_is_the_start_and_no_predictive() -> None:
    """Both read 0 until the first batch: "seconds since the last commit" was 1.8e9 (the
    stall alert fired at every start) and a log predictive of 0 claims probability 1."""
    before = time.time()
    text = exported(Metrics("dpmm"))
    line = next(x for x in text.splitlines() if x.startswith("noveld_last_commit_timestamp"))
    stamp = float(line.split()[1])
    assert before - 1 <= stamp <= time.time() + 1
    assert "noveld_log_predictive_per_token NaN" in text


def test_readyz_says_why_it_is_not_ready() -> None:
    """The body was always "not ready"; the alert runbook sends operators to it for the why."""
    now = [0.0]
    m = Metrics("dpmm", clock=lambda: now[0])
    assert m.readiness() == (503, b"not ready: starting\n")
    m.set_ready(True)
    assert m.readiness() == (200, b"ready\n")
    m.set_ready(False, "Redis unreachable (ConnectionError)")
    assert m.readiness() == (503, b"not ready: Redis unreachable (ConnectionError)\n")
    m.set_ready(True)
    now[0] = 120.0  # the loop stopped turning
    assert m.readiness() == (503, b"not ready: the batch loop has not turned for 120 s\n")


def test_check_ready_names_why_the_daemon_is_not_ready(capsys: pytest.CaptureFixture[str]) -> None:
    """``noveld check --ready`` prints the /readyz reason, not only "HTTP Error 503"."""
    from noveld.daemon.cli import main
    from noveld.daemon.metrics import MetricsServer

    m = Metrics("dpmm")
    m.set_ready(False, "no partitions assigned (waiting for the group)")
    server = MetricsServer(m, 0).start()
    try:
        assert main(["check", "--metrics-port", str(server.port), "--ready"]) == 1
        assert "no partitions assigned" in capsys.readouterr().err
        m.set_ready(True)
        assert main(["check", "--metrics-port", str(server.port), "--ready"]) == 0
    finally:
        server.stop()


def test_check_does_not_import_the_model() -> None:
    """A container HEALTHCHECK runs ``noveld check`` every 15 s with a 5 s timeout; through
    the whole command line each run imported numpy and numba (~2.8 s, ~126 MiB)."""
    import subprocess
    import sys

    probe = (
        "import sys; sys.argv = ['noveld', 'check', '--metrics-port', '1']; "
        "from noveld.launch import main; code = main(); "
        "print(code, sorted(m for m in ('numpy', 'numba', 'redis') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.stdout.split("\n")[-2] == "1 []", out  # port 1: nothing listens, exit 1
    assert "noveld check: http://127.0.0.1:1/healthz" in out.stderr
