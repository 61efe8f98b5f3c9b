"""Errors sinks raise so the pipeline can tell "retry later" from a bug, and the start-up
message for unreachable brokers."""

from __future__ import annotations


class DeliveryFailed(RuntimeError):
    """An event sink could not deliver now (broker unreachable, timeouts); the events stay in
    the outbox and are retried after the next commit."""


class EventsRefused(DeliveryFailed):
    """The sink delivered every event but these, which it can never deliver (larger than the
    broker or producer takes): retrying them would hold the outbox behind them for ever."""

    def __init__(self, refused: dict[str, str]) -> None:
        self.refused = refused  # event_id -> why
        super().__init__(f"{len(refused)} events refused for good")


class DeadLettersFailed(RuntimeError):
    """The dead-letter sink could not take a batch's dead letters: the batch must not be
    committed (its invalid records would be lost), so the run stops and the next one redoes it."""


class BrokerSilent(RuntimeError):
    """A Kafka client's start-up (connection, TLS handshake, version probe, metadata) got no
    answer within its bound: something accepts connections at the address but does not speak
    Kafka to this client (a hung broker, or a TLS listener talked to in plaintext or the
    reverse)."""

    def __init__(self, what: str, seconds: float) -> None:
        super().__init__(f"{what} got no answer within {seconds:.0f} s")
        self.what = what
        self.seconds = seconds


def kafka_unreachable(bootstrap: str, security_protocol: str, exc: BaseException) -> str:
    """The start-up error for clients that could not connect: kafka-python reports a refused
    TLS handshake or rejected credentials as a failed bootstrap, so name what to check. A
    client that got no answer (:class:`BrokerSilent`, or kafka-python's bootstrap timeout) is
    most often talking to a listener of another security protocol: say so."""
    from kafka.errors import KafkaTimeoutError  # here: the file modes never import kafka

    check = "" if security_protocol == "PLAINTEXT" else ", the credentials and the CA"
    if isinstance(exc, BrokerSilent | KafkaTimeoutError):
        hint = (
            f"is the broker up, the address right, and does its listener expect "
            f"{security_protocol}? A listener that expects TLS talked to in plaintext, or a "
            "plaintext one talked to with TLS, accepts the connection and never answers: check "
            f"kafka.security_protocol (--kafka-security-protocol){check}"
        )
    elif security_protocol == "PLAINTEXT":
        hint = "is the broker up and the address right?"
    else:
        hint = (
            f"is the broker up, the address right, and does its listener expect "
            f"{security_protocol}? check kafka.security_protocol{check}"
        )
    return f"cannot reach Kafka at {bootstrap} ({security_protocol}): {exc}; {hint}"
