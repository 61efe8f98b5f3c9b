"""The Kafka security flags shared by ``noveld run`` and ``noveld produce``, each declared once
with the ``kafka.*`` setting it sets."""

from __future__ import annotations

import argparse
from typing import Any

from noveld.daemon.flags import Flag, add_entries, flag, overrides

KAFKA_SECURITY: tuple[Flag, ...] = (
    flag(
        "--kafka-security-protocol",
        setting="kafka.security_protocol",
        choices=["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"],
        help="PLAINTEXT (default), SSL (TLS), SASL_PLAINTEXT or SASL_SSL",
    ),
    flag(
        "--kafka-sasl-mechanism",
        setting="kafka.sasl_mechanism",
        choices=["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
        help="SASL mechanism; the password from NOVELD_KAFKA__SASL_PASSWORD",
    ),
    flag(
        "--kafka-sasl-username",
        setting="kafka.sasl_username",
        metavar="USER",
        help="SASL user name",
    ),
    flag(
        "--kafka-ssl-cafile",
        setting="kafka.ssl_cafile",
        metavar="PEM",
        help="CA bundle to verify the brokers",
    ),
    flag(
        "--kafka-ssl-certfile",
        setting="kafka.ssl_certfile",
        metavar="PEM",
        help="client certificate (mTLS)",
    ),
    flag(
        "--kafka-ssl-keyfile", setting="kafka.ssl_keyfile", metavar="PEM", help="client key (mTLS)"
    ),
)
"""TLS and SASL for every Kafka client; the password only from the environment or the config
file (a flag would show in ``ps``)."""

KAFKA_SECURITY_FLAGS = {f.dest: str(f.setting).removeprefix("kafka.") for f in KAFKA_SECURITY}
"""argparse dest → ``kafka.*`` setting of :func:`add_kafka_security_flags`."""


def add_kafka_security_flags(group: argparse._ArgumentGroup) -> None:
    """Add the TLS and SASL flags to ``group``."""
    add_entries(group, KAFKA_SECURITY)


def kafka_security_overrides(ns: argparse.Namespace) -> dict[str, Any]:
    """The ``kafka.*`` settings given by these flags (those not given are left out)."""
    given: dict[str, Any] = overrides(ns, KAFKA_SECURITY).get("kafka", {})
    return given
