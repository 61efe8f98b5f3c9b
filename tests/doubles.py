"""Test doubles shared by the unit and integration tests (servers live in tests/servers/)."""

from __future__ import annotations


class NoDlq:
    """Dead-letter sink for inputs that have none: any dead letter fails the test."""

    def send(self, *args: object) -> None:
        raise AssertionError("no dead letters expected")

    def flush(self) -> None:
        pass


class CollectingDlq:
    """Dead-letter sink that keeps what it is sent: ``(record, reason, detail)``."""

    def __init__(self) -> None:
        self.sent: list[tuple[object, ...]] = []

    def send(self, *args: object) -> None:
        self.sent.append(args)

    def flush(self) -> None:
        pass
