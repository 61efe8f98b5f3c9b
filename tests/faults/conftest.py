"""Fault-test clean-up: no daemon outlives its test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka_daemon import STARTED


@pytest.fixture(autouse=True)
def reap_daemons() -> Iterator[None]:
    """Kill (SIGKILL) every daemon the test started that is still running when it ends (after
    a failed assertion), so none keeps writing to a shared broker or holds ports and files."""
    yield
    while STARTED:
        proc = STARTED.pop()
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
