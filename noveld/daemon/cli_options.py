"""The options of ``noveld run`` and the commands sharing them, each declared once with the
setting it sets; the parser and the settings overrides are both made from these tables."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from noveld.daemon.flags import Exclusive, Flag, Group, add_groups, flag, flags_of, overrides
from noveld.daemon.kafka_flags import KAFKA_SECURITY
from noveld.daemon.model_kinds import MODEL_FLAGS, MODEL_SWITCHES

_FIELDS = ["id", "text", "tokens", "embedding", "label", "context", "ts"]
_CONTEXT_FLAG = {
    "action": "append",
    "help": "JSON field holding the document's context: an object of context fields, or a "
    "scalar (one context field, named after it); give it again for more (default context)",
}

#: options of every command that runs a model (run, config show, evaluate, fit, demo)
COMMON: tuple[Group, ...] = (
    Group(
        None,
        (
            flag("--config", type=Path, help="TOML config file (see docs/configuration.md)"),
            flag("--namespace", setting="namespace", help="state namespace (default: default)"),
        ),
    ),
    Group(
        "model",
        (
            flag(
                "--model",
                setting="model.kind",
                choices=["dpmm", "svi", "hdp"],
                help="inference engine: dpmm (collapsed CRP seating + Gibbs, default), svi "
                "(streaming variational, natural-gradient steps) or hdp (two-level category/topic "
                "HDP with known labels and context)",
            ),
            *MODEL_FLAGS,
            *MODEL_SWITCHES,
        ),
    ),
    Group(
        "batching and novelty",
        (
            flag(
                "--batch-size",
                setting="batch.max_docs",
                type=int,
                help="documents per mini-batch (default 256)",
            ),
            flag(
                "--novelty-min-size",
                setting="novelty.min_size",
                type=int,
                help="documents that confirm a birth (3)",
            ),
            flag(
                "--novelty-confirm-within",
                setting="novelty.confirm_within",
                type=int,
                help="…within this many documents of the birth (2000)",
            ),
            Exclusive(
                (
                    flag(
                        "--emit-assignments",
                        setting="events.assignments",
                        dest="emit_assignments",
                        action="store_const",
                        const="document",
                        help="also emit a document.assigned event per document, with its cluster",
                    ),
                    flag(
                        "--emit-assignment-batches",
                        setting="events.assignments",
                        dest="emit_assignments",
                        action="store_const",
                        const="batch",
                        help=(
                            "…or the same as one documents.assigned event per batch and input "
                            "partition (cheaper: production mode keeps most of its throughput)"
                        ),
                    ),
                )
            ),
            Exclusive(
                (
                    flag(
                        "--exemplar-text",
                        setting="stories.exemplar_text",
                        dest="exemplar_text",
                        action="store_true",
                        default=None,
                        help="keep the text of each story's exemplar documents in the state "
                        "(default; shown by noveld stories)",
                    ),
                    flag(
                        "--no-exemplar-text",
                        setting="stories.exemplar_text",
                        dest="exemplar_text",
                        action="store_false",
                        default=None,
                        help="…or only their ids (for privacy: no document text is stored)",
                    ),
                )
            ),
        ),
    ),
    Group(
        "input fields",
        tuple(
            flag(
                f"--{name}-field",
                setting=f"fields.{name}",
                dest=f"field_{name}",
                **{
                    "metavar": "NAME",
                    "help": f"JSON field holding the document {name} (default {name})",
                    **(_CONTEXT_FLAG if name == "context" else {}),
                },
            )
            for name in _FIELDS
        ),
    ),
    Group(
        "limits",
        (
            flag(
                "--compact-vocabulary-at",
                setting="state.compact_vocabulary_at",
                type=int,
                metavar="WORDS",
                help="dpmm, hdp: once the vocabulary holds this many words (default 100000) and "
                "no live cluster counts half of them, renumber the word ids over the words in use "
                "(results unchanged; 0 = never). Under forgetting this bounds the vocabulary's "
                "memory",
            ),
            flag(
                "--max-doc-bytes",
                setting="limits.max_doc_bytes",
                type=int,
                help="records longer than this are dead-lettered as oversize (1000000)",
            ),
            flag(
                "--max-doc-tokens",
                setting="limits.max_doc_tokens",
                type=int,
                metavar="TOKENS",
                help="documents longer than this many tokens are truncated to it or "
                "dead-lettered, as --oversize says (16384, about 100 KB of English)",
            ),
            flag(
                "--oversize",
                setting="limits.oversize",
                choices=["truncate", "dead-letter"],
                help="a document over --max-doc-tokens: truncate (default; counted in the "
                "summary and metrics) or dead-letter (reason oversize)",
            ),
            flag(
                "--max-consecutive-invalid",
                setting="limits.max_consecutive_invalid",
                type=int,
                help="stop (exit 3) after this many invalid records in a row (1000)",
            ),
        ),
    ),
)

#: Kafka-mode options; all but the first two are read in Kafka mode only
KAFKA = Group(
    "Kafka (production mode; needs --redis-url)",
    (
        flag(
            "--kafka-bootstrap",
            setting="kafka.bootstrap_servers",
            metavar="HOST:PORT",
            help="consume --input-topic instead of reading --input",
        ),
        flag("--input-topic", setting="kafka.input_topic", help="topic of input documents"),
        flag("--group", setting="kafka.group", help="consumer group (default noveld)"),
        flag(
            "--events-topic",
            setting="kafka.events_topic",
            help="topic for novelty events (default noveld.events)",
        ),
        flag(
            "--dlq-topic",
            setting="kafka.dlq_topic",
            help="topic for dead letters (default noveld.dlq)",
        ),
        flag(
            "--session-timeout-ms",
            setting="kafka.session_timeout_ms",
            type=int,
            help="consumer session timeout (10000)",
        ),
        flag(
            "--accept-empty-state",
            setting="kafka.accept_empty_state",
            action="store_true",
            default=None,  # not given: the config file or the environment decides
            help="start a namespace that has no offsets for the input topic although the "
            "consumer group has read it before (without it: exit 6, the state was probably lost)",
        ),
        *KAFKA_SECURITY,
    ),
)

#: ``run``'s input, state, Redis, Kafka and metrics options (also ``config show``'s, so it
#: shows what a given ``noveld run`` line will use)
RUN: tuple[Group, ...] = (
    Group(
        None,
        (
            flag("--input", "-i", setting="input", help="JSONL file, or - for stdin (default -)"),
            flag(
                "--state-dir",
                setting="state.dir",
                type=Path,
                help="directory for the state snapshot",
            ),
            flag(
                "--snapshot-interval",
                setting="state.snapshot_interval_s",
                type=float,
                help="seconds between snapshots (default 5; 0 = every batch)",
            ),
            flag(
                "--dlq",
                setting="dlq",
                type=Path,
                help="dead-letter file (default <state-dir>/dlq.jsonl or ./noveld-dlq.jsonl)",
            ),
            flag(
                "--redis-url",
                setting="redis.url",
                help="keep the state in Redis instead of --state-dir; --namespace names it. "
                "redis://[:password@]host:port/db (a server or a cluster's endpoint), rediss:// "
                "(TLS), or redis+sentinel://[:password@]host:port[,host:port...]/service[/db] "
                "(the primary Redis Sentinel names)",
            ),
            flag(
                "--redis-replicas-to-ack",
                setting="redis.replicas_to_ack",
                type=int,
                metavar="N",
                help="publish events only of commits N Redis replicas acknowledged (default 0; "
                "set it to the replica count of a Redis with failover)",
            ),
            flag(
                "--redis-socket-timeout",
                setting="redis.socket_timeout_s",
                type=float,
                metavar="SECONDS",
                help="longest wait for one Redis reply before Redis counts as unreachable and the "
                "daemon pauses and retries (default 10; a hung server or a silent network)",
            ),
            flag(
                "--redis-writer-lease-ms",
                setting="redis.writer_lease_ms",
                type=int,
                metavar="MS",
                help="svi (one writer per namespace): a crashed writer's lease lapses after this "
                "long and a standby replica takes over (default 10000)",
            ),
        ),
    ),
    KAFKA,
    Group(
        None,
        (
            flag(
                "--metrics-port",
                setting="metrics_port",
                type=int,
                help="serve /metrics, /healthz and /readyz on this port (0 = any free)",
            ),
        ),
    ),
    Group(
        "web view (read-only page of live stories; docs/operations.md)",
        (
            flag(
                "--ui-port",
                setting="ui.port",
                type=int,
                metavar="PORT",
                help="serve the web view (/ and /api/…) on this port (0 = any free); off unless "
                "given",
            ),
            flag(
                "--ui-bind",
                setting="ui.bind",
                metavar="ADDR",
                help="address the view listens on (default 127.0.0.1; 0.0.0.0 for every "
                "interface: then set a token)",
            ),
            flag(
                "--ui-token-file",
                setting="ui.token_file",
                type=Path,
                metavar="FILE",
                help="ask the view's visitors for the bearer token on FILE's first line (or set "
                "NOVELD_UI__TOKEN)",
            ),
        ),
    ),
)

KAFKA_ONLY: tuple[str, ...] = tuple(f.dest for f in flags_of(KAFKA.entries))[2:]
"""Flags (argparse dests) of ``run`` that only Kafka mode reads."""

_ALL: tuple[Flag, ...] = tuple(flags_of((*RUN, *COMMON)))


def add_common(p: argparse.ArgumentParser) -> None:
    """The model, batching, field and limit options of every command that runs a model."""
    add_groups(p, COMMON)


def add_run_options(p: argparse.ArgumentParser) -> None:
    """``run``'s input, state, Redis, Kafka and metrics options."""
    add_groups(p, RUN)


def settings_overrides(ns: argparse.Namespace) -> dict[str, Any]:
    """CLI flags that were given, as a nested settings dict."""
    return overrides(ns, _ALL)


def flag_giving(dest: str, value: Any) -> str:
    """The flag that, given, stored ``value`` in ``dest`` (``--ignore-context`` for
    ``use_context`` False)."""
    return next(f.name for f in _ALL if f.dest == dest and f.gives(value))
