"""``noveld produce FILE --topic T``: send a JSONL file's lines to a Kafka topic, with progress."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from noveld.connectors.errors import BrokerSilent, kafka_unreachable
from noveld.daemon.errors import UserError
from noveld.daemon.kafka_flags import add_kafka_security_flags, kafka_security_overrides
from noveld.daemon.settings import KafkaSettings, load_settings


def _cmd_produce(ns: argparse.Namespace) -> int:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    from noveld.connectors.kafka_client import BOOTSTRAP_TIMEOUT_MS, start_within

    kafka = _kafka_settings(ns)
    try:
        fh = sys.stdin.buffer if ns.file == "-" else open(ns.file, "rb")  # noqa: SIM115
    except OSError as exc:
        raise UserError(f"cannot read {ns.file}: {exc}") from exc
    try:
        producer = start_within(
            lambda: KafkaProducer(
                bootstrap_servers=ns.kafka_bootstrap,
                acks="all",
                linger_ms=5,
                retries=5,
                bootstrap_timeout_ms=BOOTSTRAP_TIMEOUT_MS,
                **kafka.client_options(),
            ),
            "the producer",
            kafka.startup_timeout_s,
        )
    except (KafkaError, BrokerSilent) as exc:
        if fh is not sys.stdin.buffer:
            fh.close()
        raise UserError(
            kafka_unreachable(ns.kafka_bootstrap, kafka.security_protocol, exc)
        ) from exc
    sent = skipped = 0
    t0 = last = time.monotonic()
    try:
        for line in fh:
            line = line.rstrip(b"\r\n")
            if not line.strip():
                skipped += 1
                continue
            producer.send(ns.topic, value=line)
            sent += 1
            now = time.monotonic()
            if not ns.quiet and now - last >= 2.0:
                last = now
                sys.stderr.write(f"noveld produce: {sent:,} records ({sent / (now - t0):,.0f}/s)\n")
        producer.flush()
    except KafkaError as exc:
        raise UserError(f"producing to {ns.topic} failed after {sent:,} records: {exc}") from exc
    finally:
        producer.close()
        if fh is not sys.stdin.buffer:
            fh.close()
    if not ns.quiet:
        dt = max(time.monotonic() - t0, 1e-9)
        sys.stderr.write(
            f"noveld produce: sent {sent:,} records to {ns.topic} in {dt:.1f}s "
            f"({sent / dt:,.0f}/s); {skipped:,} blank lines skipped\n"
        )
    return 0


def _kafka_settings(ns: argparse.Namespace) -> KafkaSettings:
    """The ``kafka`` settings (security included) from ``--config``, the environment and the
    security flags, as ``noveld run`` reads them."""
    given = {**kafka_security_overrides(ns), "bootstrap_servers": ns.kafka_bootstrap}
    return load_settings(ns.config, {"kafka": given}).kafka


def add_produce_command(sub: Any) -> None:
    """Register ``produce``."""
    p = sub.add_parser(
        "produce",
        help="send a JSONL file (or stdin) to a Kafka topic, one message per line",
        description="Each non-blank line becomes one message value (bytes as-is; the daemon "
        "validates them). Waits for the broker's acknowledgement of every message.",
    )
    p.add_argument("file", help="JSONL file, or - for stdin")
    p.add_argument("--topic", required=True, help="destination topic")
    p.add_argument("--kafka-bootstrap", required=True, metavar="HOST:PORT")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    p.add_argument("--config", type=Path, help="TOML config file (its [kafka] security settings)")
    add_kafka_security_flags(p.add_argument_group("Kafka security (as for noveld run)"))
    p.set_defaults(func=_cmd_produce)
