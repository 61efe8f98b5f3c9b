"""The metrics server's HTTP contract: /healthz and /readyz bodies and status codes, /metrics in
the format and encoding the scraper asks for, 404 elsewhere."""

from __future__ import annotations

import gzip
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from noveld.daemon.metrics import Metrics, MetricsServer


@pytest.fixture
def served() -> Iterator[tuple[Metrics, list[float], int]]:
    """Metrics on a stopped clock (``now[0]``), served on a free port."""
    now = [0.0]
    m = Metrics("dpmm", clock=lambda: now[0])
    server = MetricsServer(m, 0, host="127.0.0.1").start()
    try:
        yield m, now, server.port
    finally:
        server.stop()


def get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict, bytes]:
    """Status, headers and raw body of a GET (a 4xx/5xx too)."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def test_healthz_says_ok_until_the_loop_stalls(served: tuple[Metrics, list[float], int]) -> None:
    m, now, port = served
    status, headers, body = get(port, "/healthz")
    assert (status, body, headers["Content-Type"]) == (200, b"ok\n", "text/plain")
    now[0] = 61.0  # more than a minute without a turn
    assert get(port, "/healthz")[::2] == (503, b"loop stalled\n")
    m.turn()
    assert get(port, "/healthz")[::2] == (200, b"ok\n")


def test_readyz_bodies_and_codes(served: tuple[Metrics, list[float], int]) -> None:
    m, _, port = served
    assert get(port, "/readyz")[::2] == (503, b"not ready: starting\n")
    m.set_ready(True)
    status, headers, body = get(port, "/readyz")
    assert (status, body, headers["Content-Type"]) == (200, b"ready\n", "text/plain")
    m.set_ready(False, "Redis unreachable (ConnectionError)")
    assert get(port, "/readyz")[::2] == (503, b"not ready: Redis unreachable (ConnectionError)\n")


def test_other_paths_are_not_found(served: tuple[Metrics, list[float], int]) -> None:
    _, _, port = served
    for path in ("/", "/metricsx", "/favicon.ico"):
        assert get(port, path)[::2] == (404, b"not found\n")


def test_metrics_in_the_text_format_by_default(served: tuple[Metrics, list[float], int]) -> None:
    _, _, port = served
    status, headers, body = get(port, "/metrics")
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain")
    assert "Content-Encoding" not in headers
    assert b'noveld_build_info{model="dpmm"' in body
    assert b"# EOF" not in body


def test_metrics_in_openmetrics_when_asked(served: tuple[Metrics, list[float], int]) -> None:
    _, _, port = served
    status, headers, body = get(port, "/metrics", {"Accept": "application/openmetrics-text"})
    assert status == 200
    assert headers["Content-Type"].startswith("application/openmetrics-text")
    assert body.endswith(b"# EOF\n")
    assert b"noveld_batches_total 0.0" in body


def test_metrics_gzipped_when_accepted(served: tuple[Metrics, list[float], int]) -> None:
    _, _, port = served
    plain = get(port, "/metrics")[2]
    status, headers, body = get(port, "/metrics", {"Accept-Encoding": "gzip"})
    assert status == 200 and headers["Content-Encoding"] == "gzip"
    text = gzip.decompress(body)
    assert text.splitlines()[:3] == plain.splitlines()[:3]
    assert b"noveld_dlq_messages_total" in text
