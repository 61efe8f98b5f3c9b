"""The ``kafka`` section: brokers, topics and client security of production mode, checked at
start-up (legal topic names, no topic read back as input, consistent TLS and SASL)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator, model_validator

from noveld.daemon.settings_sections import COMPLETE, Section

_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


class KafkaSettings(Section):
    """Kafka input and output topics (production mode)."""

    bootstrap_servers: str | None = None
    input_topic: str | None = None
    group: str = Field("noveld", min_length=1)
    events_topic: str = "noveld.events"
    dlq_topic: str = "noveld.dlq"
    session_timeout_ms: int = Field(10_000, ge=1000)
    fetch_max_wait_ms: int = Field(
        100,
        ge=1,
        le=60_000,
        description="longest a fetch waits at the broker for input records. Apache Kafka "
        "answers as soon as records arrive, so this only paces an idle consumer's fetches; a "
        "broker that holds every fetch this long (tansu) delays each document by up to it, "
        "and replicas sharing a namespace seat that long blind to each other's documents",
    )
    accept_empty_state: bool = Field(
        False,
        description="start even when the namespace has no offsets for the input topic but "
        "the consumer group has read it before (otherwise exit 6: the namespace's state was "
        "probably lost, and starting would re-read only what the topic retains under old "
        "event ids)",
    )
    startup_timeout_s: float = Field(
        15.0,
        gt=0,
        le=600,
        allow_inf_nan=False,
        description="longest wait for each Kafka client to start (connect, TLS handshake, "
        "first metadata) before the start fails with exit 2",
    )
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT", description="how clients talk to the brokers (TLS: SSL or SASL_SSL)"
    )
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_cafile: Path | None = Field(None, description="CA bundle (PEM); default: the system's")
    ssl_certfile: Path | None = Field(None, description="client certificate (PEM), for mTLS")
    ssl_keyfile: Path | None = Field(None, description="client key (PEM), for mTLS")
    ssl_check_hostname: bool = True

    @field_validator("input_topic", "events_topic", "dlq_topic")
    @classmethod
    def _legal_topic_name(cls, value: str | None) -> str | None:
        """Kafka's own rule for topic names, checked at start-up: an illegal events topic was
        found only when the first event was sent, after its commit, so every restart failed
        again on the event waiting in the outbox."""
        if value is not None and (not _TOPIC_NAME.fullmatch(value) or value in (".", "..")):
            raise ValueError(
                f"{value!r} is not a legal Kafka topic name (1-249 of A-Z a-z 0-9 . _ -)"
            )
        return value

    @model_validator(mode="after")
    def _topics_do_not_loop(self) -> KafkaSettings:
        """Input, events and DLQ topics differ, and a bootstrap list is not blank: events read
        back as documents, or a dead letter read back as input (around and around until the
        circuit breaker), and an empty bootstrap silently meaning stdin, were accepted."""
        if self.bootstrap_servers is not None and not self.bootstrap_servers.strip(" ,"):
            raise ValueError(
                "kafka.bootstrap_servers is empty; give host:port[,host:port…], or leave it "
                "unset to read --input FILE or stdin"
            )
        for server in (self.bootstrap_servers or "").split(","):
            if server.strip() and not _is_host_port(server.strip()):
                raise ValueError(
                    f"kafka.bootstrap_servers: {server.strip()!r} is not host[:port] (a port "
                    "1-65535; an IPv6 address in brackets, [::1]:9092)"
                )
        roles = {"events_topic": self.events_topic, "dlq_topic": self.dlq_topic}
        if self.input_topic is not None:
            roles = {"input_topic": self.input_topic, **roles}
        seen: dict[str, str] = {}
        for role, topic in roles.items():
            if topic in seen:
                raise ValueError(
                    f"kafka.{seen[topic]} and kafka.{role} are both {topic!r}; noveld would "
                    "read its own output back"
                )
            seen[topic] = role
        return self

    @model_validator(mode="after")
    def _security_is_consistent(self, info: ValidationInfo) -> KafkaSettings:
        """SASL settings only with a SASL protocol (and then all of them), TLS files only with
        TLS, and every named file readable: a mistake here is a start-up error, not a hang.
        Checked on the complete settings only (``load_settings``), since one layer may name
        the protocol (a flag) and another the password (the environment)."""
        if not (info.context or {}).get(COMPLETE):
            return self
        if self.bootstrap_servers is None and self.security_protocol == "PLAINTEXT":
            return self  # Kafka not in use: a shared secret in the environment is harmless
        sasl = self.security_protocol.startswith("SASL_")
        tls = self.security_protocol.endswith("SSL")
        given = [
            name
            for name in ("sasl_mechanism", "sasl_username", "sasl_password")
            if getattr(self, name) is not None
        ]
        if sasl and len(given) < 3:
            missing = {"sasl_mechanism", "sasl_username", "sasl_password"} - set(given)
            raise ValueError(
                f"security_protocol {self.security_protocol} needs "
                + ", ".join(f"kafka.{m}" for m in sorted(missing))
            )
        if not sasl and given:
            raise ValueError(
                f"kafka.{given[0]} is set but security_protocol is {self.security_protocol} "
                "(SASL_PLAINTEXT or SASL_SSL use it)"
            )
        for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
            path = getattr(self, name)
            if path is None:
                continue
            if not tls:
                raise ValueError(
                    f"kafka.{name} is set but security_protocol is {self.security_protocol} "
                    "(SSL or SASL_SSL use it)"
                )
            if not path.is_file():
                raise ValueError(f"kafka.{name}: no such file {str(path)!r}")
        if self.ssl_keyfile is not None and self.ssl_certfile is None:
            raise ValueError("kafka.ssl_keyfile needs kafka.ssl_certfile (the client certificate)")
        return self

    def client_options(self) -> dict[str, Any]:
        """kafka-python keyword arguments for these security settings (for every client:
        consumer, producers, admin); empty for PLAINTEXT, kafka-python's default."""
        if self.security_protocol == "PLAINTEXT":
            return {}
        opts: dict[str, Any] = {"security_protocol": self.security_protocol}
        if self.security_protocol.startswith("SASL_"):
            assert self.sasl_password is not None  # the validator saw to it
            opts["sasl_mechanism"] = self.sasl_mechanism
            opts["sasl_plain_username"] = self.sasl_username
            opts["sasl_plain_password"] = self.sasl_password.get_secret_value()
        if self.security_protocol.endswith("SSL"):
            opts["ssl_check_hostname"] = self.ssl_check_hostname
            for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
                path = getattr(self, name)
                if path is not None:
                    opts[name] = str(path)
        return opts


def _is_host_port(server: str) -> bool:
    """``host``, ``host:port`` or ``[ipv6]:port`` with a port in 1–65535."""
    if server.startswith("["):
        addr, sep, rest = server[1:].partition("]")
        if not sep or not addr:
            return False
        if not rest:
            return True
        if not rest.startswith(":"):
            return False
        port = rest[1:]
    elif ":" in server:
        host, port = server.rsplit(":", 1)
        if not host or ":" in host:
            return False
    else:
        return True
    return port.isdigit() and 1 <= int(port) <= 65535
