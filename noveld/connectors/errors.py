"""Errors sinks raise so the pipeline can tell "retry later" from a bug, and the start-up
message for unreachable brokers."""

from __future__ import annotations


class DeliveryFailed(RuntimeError):
    """An event sink could not deliver now (broker unreachable, timeouts); the events stay in
    the outbox and are retried after the next commit."""


class DeadLettersFailed(RuntimeError):
    """The dead-letter sink could not take a batch's dead letters: the batch must not be
    committed (its invalid records would be lost), so the run stops and the next one redoes it."""


def kafka_unreachable(bootstrap: str, security_protocol: str, exc: BaseException) -> str:
    """The start-up error for clients that could not connect: kafka-python reports a refused
    TLS handshake or rejected credentials as a failed bootstrap, so name what to check."""
    hint = "is the broker up and the address right?"
    if security_protocol != "PLAINTEXT":
        hint = (
            f"is the broker up, the address right, and does its listener expect "
            f"{security_protocol}? check kafka.security_protocol, the credentials and the CA"
        )
    return f"cannot reach Kafka at {bootstrap} ({security_protocol}): {exc}; {hint}"
