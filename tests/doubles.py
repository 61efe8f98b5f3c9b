"""Test doubles shared by the unit and integration tests (servers live in harness.py)."""

from __future__ import annotations


class NoDlq:
    """Dead-letter sink for inputs that have none: any dead letter fails the test."""

    def send(self, *args: object) -> None:
        raise AssertionError("no dead letters expected")

    def flush(self) -> None:
        pass
