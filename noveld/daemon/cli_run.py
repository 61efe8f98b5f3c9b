"""``noveld run`` (a file, stdin or a Kafka topic through the pipeline, with a summary on
stderr) and ``noveld config show`` (the settings a command line would run with)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import IO, Any

from noveld.daemon.cli_settings import settings_from
from noveld.daemon.embedded import run_file
from noveld.daemon.errors import UserError


def cmd_run(ns: argparse.Namespace) -> int:
    """Run the pipeline over ``--input`` (or stdin) or, with ``--kafka-bootstrap``, Kafka."""
    settings = settings_from(ns)
    k = settings.kafka
    if k.input_topic and not k.bootstrap_servers:
        raise UserError(
            f"--input-topic {k.input_topic} needs --kafka-bootstrap (or "
            "NOVELD_KAFKA__BOOTSTRAP_SERVERS); without it noveld reads --input FILE or stdin"
        )
    if k.bootstrap_servers and settings.input is not None:
        raise UserError(
            "give either --input (a file or stdin) or --kafka-bootstrap (a Kafka topic), not both"
        )
    if settings.kafka.bootstrap_servers:
        from noveld.daemon.kafka_mode import run_kafka

        code, progress = run_kafka(settings, None if ns.quiet else sys.stderr)
        if not ns.quiet:
            where = f"state in Redis, namespace {settings.namespace!r}"
            sys.stderr.write(progress.summary(where, code))
        return code
    input_path = settings.input or "-"
    err = None if ns.quiet else sys.stderr
    if input_path == "-" and err is not None and _on_terminal(sys.stdin):
        err.write(
            "noveld: reading JSONL documents from stdin (one JSON object a line); end with "
            "Ctrl-D, or give --input FILE\n"
        )
        err.flush()
    code, progress, pipeline = run_file(settings, input_path, sys.stdout, err)
    if pipeline.pending_events:  # "done" must not read as "every event went out"
        sys.stderr.write(
            f"noveld: {pipeline.pending_events:,} events are not delivered yet"
            + (" (held for Redis replicas: redis.replicas_to_ack)" if pipeline.held_for_replicas
               else "")
            + "; they stay in the outbox and the next run delivers them first\n"
        )  # fmt: skip
    if not ns.quiet:
        if settings.redis.url is not None:
            where = f"state in Redis, namespace {settings.namespace!r}"
        elif settings.state.dir is not None:
            where = f"state in {settings.state.dir}"
        else:
            where = "state not saved"
        sys.stderr.write(
            progress.summary(
                f"{where}; dead letters in {settings.dlq_path()}" if progress.invalid else where,
                code,
            )
        )
    return code


def _on_terminal(stream: IO[str] | None) -> bool:
    """Whether ``stream`` is a terminal (a person typing, not a pipe or a file)."""
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError):  # replaced or closed
        return False


def cmd_config_show(ns: argparse.Namespace) -> int:
    """Print the effective settings, flat (``model.alpha = 0.03``) or as JSON."""
    settings = settings_from(ns)
    data = settings.model_dump(mode="json")
    if ns.json:
        print(json.dumps(data, indent=2))
    else:
        for line in _flatten(data):
            print(line)
    return 0


def _flatten(d: dict[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for k, v in d.items():
        if isinstance(v, dict):
            out += _flatten(v, f"{prefix}{k}.")
        else:
            out.append(f"{prefix}{k} = {json.dumps(v)}")
    return out
