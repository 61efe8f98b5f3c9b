"""The Kafka security flags shared by ``noveld run`` and ``noveld produce``."""

from __future__ import annotations

import argparse
from typing import Any


def add_kafka_security_flags(group: argparse._ArgumentGroup) -> None:
    """TLS and SASL for every Kafka client; the password only from the environment or the
    config file (a flag would show in ``ps``)."""
    group.add_argument(
        "--kafka-security-protocol",
        choices=["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"],
        help="PLAINTEXT (default), SSL (TLS), SASL_PLAINTEXT or SASL_SSL",
    )
    group.add_argument(
        "--kafka-sasl-mechanism",
        choices=["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
        help="SASL mechanism; the password from NOVELD_KAFKA__SASL_PASSWORD",
    )
    group.add_argument("--kafka-sasl-username", metavar="USER", help="SASL user name")
    group.add_argument("--kafka-ssl-cafile", metavar="PEM", help="CA bundle to verify the brokers")
    group.add_argument("--kafka-ssl-certfile", metavar="PEM", help="client certificate (mTLS)")
    group.add_argument("--kafka-ssl-keyfile", metavar="PEM", help="client key (mTLS)")


KAFKA_SECURITY_FLAGS = {
    "kafka_security_protocol": "security_protocol",
    "kafka_sasl_mechanism": "sasl_mechanism",
    "kafka_sasl_username": "sasl_username",
    "kafka_ssl_cafile": "ssl_cafile",
    "kafka_ssl_certfile": "ssl_certfile",
    "kafka_ssl_keyfile": "ssl_keyfile",
}
"""argparse dest → ``kafka.*`` setting of :func:`add_kafka_security_flags`."""


def kafka_security_overrides(ns: argparse.Namespace) -> dict[str, Any]:
    """The ``kafka.*`` settings given by these flags (those not given are left out)."""
    return {
        key: getattr(ns, dest)
        for dest, key in KAFKA_SECURITY_FLAGS.items()
        if getattr(ns, dest, None) is not None
    }
