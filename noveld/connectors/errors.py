"""Errors sinks raise so the pipeline can tell "retry later" from a bug."""

from __future__ import annotations


class DeliveryFailed(RuntimeError):
    """An event sink could not deliver now (broker unreachable, timeouts); the events stay in
    the outbox and are retried after the next commit."""
