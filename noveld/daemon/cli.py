"""``noveld`` command line: run, evaluate, generate, demo, config show.

Every command turns bad configuration, unreadable files and incompatible state into a one-line
error and a non-zero exit code — never a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import redis
from pydantic import ValidationError

from noveld import __version__
from noveld.daemon import check as health
from noveld.daemon.embedded import run_file
from noveld.daemon.errors import UserError
from noveld.daemon.exits import EXIT_INTERRUPTED, EXIT_IO, EXIT_STATE_DAMAGED, EXIT_USAGE
from noveld.daemon.kafka_flags import (
    KAFKA_SECURITY_FLAGS,
    add_kafka_security_flags,
    kafka_security_overrides,
)
from noveld.daemon.outage import outage_reason
from noveld.daemon.settings import (
    ConfigError,
    ModelSettings,
    Settings,
    load_settings,
    unknown_env_names,
)
from noveld.daemon.stepping import state_damaged
from noveld.state.redis.reasons import StoreConflict

_MODEL_FLAGS: list[tuple[str, str, type, str]] = [
    ("--alpha", "alpha", float, "DP concentration α (per document of the batch when scaled)"),
    ("--beta", "beta", float, "symmetric Dirichlet prior β on cluster word distributions"),
    ("--alpha-scaling", "alpha_scaling", str, "none | batch (α·|B|, as MStream)"),
    ("--discount", "discount", float, "Pitman–Yor discount in [0, 1) (hdp: of categories); 0 = DP"),
    ("--rejuvenation-sweeps", "rejuvenation_sweeps", int, "Gibbs sweeps over each batch"),
    ("--half-life", "half_life_docs", float, "forgetting half-life in documents (0 = off)"),
    ("--retire-min-mass", "retire_min_mass", float, "retire clusters whose mass falls below"),
    ("--max-active-clusters", "max_active_clusters", int, "evict the lightest clusters beyond"),
    ("--seed", "seed", int, "random seed (runs are reproducible per seed)"),
    ("--topics", "topics", int, "hdp: number of topics L (keep above the live categories)"),
    ("--zeta", "zeta", float, "hdp: Dirichlet prior ζ of categories on topics"),
    ("--gamma", "gamma", float, "hdp: category concentration γ (start value when resampled)"),
    ("--table-alpha", "table_alpha", float, "hdp: per-document table concentration α (start)"),
    ("--context-prior", "context_prior", float, "hdp: Dirichlet prior η of context values"),
    ("--likelihood", "likelihood", str, "dpmm: multinomial (default) | edcm | vmf (embeddings)"),
    ("--edcm-prior", "edcm_prior", float, "edcm: symmetric prior b0 of each word's β (0.001)"),
    ("--edcm-prior-docs", "edcm_prior_docs", float, "edcm: the prior's weight in documents (5)"),
    ("--embedding-dim", "embedding_dim", int, "vmf: the embeddings' dimension p (required)"),
    ("--vmf-cosine", "vmf_cosine", float, "vmf: typical member-to-mean cosine, sets κ (0.5)"),
]
_FIELD_FLAGS = ["id", "text", "tokens", "embedding", "label", "context", "ts"]


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", type=Path, help="TOML config file (see docs/configuration.md)")
    p.add_argument("--namespace", help="state namespace (default: default)")
    g = p.add_argument_group("model")
    g.add_argument(
        "--model",
        choices=["dpmm", "svi", "hdp"],
        help="inference engine: dpmm (collapsed CRP seating + Gibbs, default), svi "
        "(streaming variational, natural-gradient steps) or hdp (two-level category/topic "
        "HDP with known labels and context)",
    )
    for flag, key, typ, help_ in _MODEL_FLAGS:
        g.add_argument(flag, dest=key, type=typ, help=help_)
    det = g.add_mutually_exclusive_group()
    det.add_argument(
        "--deterministic",
        dest="deterministic",
        action="store_true",
        default=None,
        help="MAP seating (default)",
    )
    det.add_argument(
        "--sampled",
        dest="deterministic",
        action="store_false",
        help="sample seatings from the CRP conditional",
    )
    g.add_argument(
        "--use-labels",
        dest="use_labels",
        action="store_true",
        default=None,
        help="treat documents' label field as known categories (semi-supervised: labelled "
        "documents are seated in their category; new clusters are novel)",
    )
    ctx = g.add_mutually_exclusive_group()
    ctx.add_argument(
        "--use-context",
        dest="use_context",
        action="store_true",
        default=None,
        help="hdp: documents' context fields are evidence of their category (default)",
    )
    ctx.add_argument(
        "--ignore-context",
        dest="use_context",
        action="store_false",
        help="hdp: cluster on content only",
    )
    b = p.add_argument_group("batching and novelty")
    b.add_argument("--batch-size", type=int, help="documents per mini-batch (default 256)")
    b.add_argument("--novelty-min-size", type=int, help="documents that confirm a birth (3)")
    b.add_argument(
        "--novelty-confirm-within", type=int, help="…within this many documents of the birth (2000)"
    )
    a = b.add_mutually_exclusive_group()
    a.add_argument(
        "--emit-assignments",
        dest="emit_assignments",
        action="store_const",
        const="document",
        help="also emit a document.assigned event per document, with its cluster",
    )
    a.add_argument(
        "--emit-assignment-batches",
        dest="emit_assignments",
        action="store_const",
        const="batch",
        help=(
            "…or the same as one documents.assigned event per batch and input partition "
            "(cheaper: production mode keeps most of its throughput)"
        ),
    )
    f = p.add_argument_group("input fields")
    for name in _FIELD_FLAGS:
        f.add_argument(
            f"--{name}-field",
            dest=f"field_{name}",
            metavar="NAME",
            help=f"JSON field holding the document {name} (default {name})",
        )
    lim = p.add_argument_group("limits")
    lim.add_argument(
        "--compact-vocabulary-at",
        type=int,
        metavar="WORDS",
        help="dpmm, hdp: once the vocabulary holds this many words (default 100000) and no live "
        "cluster counts half of them, renumber the word ids over the words in use (results "
        "unchanged; 0 = never). Under forgetting this bounds the vocabulary's memory",
    )
    lim.add_argument("--max-doc-bytes", type=int, help="larger records are dead-lettered")
    lim.add_argument(
        "--max-consecutive-invalid",
        type=int,
        help="stop (exit 3) after this many invalid records in a row (1000)",
    )


def _overrides(ns: argparse.Namespace) -> dict[str, Any]:
    """CLI flags that were given, as a nested settings dict."""
    o: dict[str, Any] = {}

    def put(section: str | None, key: str, value: Any) -> None:
        if value is None:
            return
        if section is None:
            o[key] = value
        else:
            o.setdefault(section, {})[key] = value

    put(None, "namespace", getattr(ns, "namespace", None))
    put("model", "kind", getattr(ns, "model", None))
    for _, key, _, _ in _MODEL_FLAGS:
        put("model", key, getattr(ns, key, None))
    put("model", "use_labels", getattr(ns, "use_labels", None))
    put("model", "use_context", getattr(ns, "use_context", None))
    put("model", "deterministic", getattr(ns, "deterministic", None))
    put("batch", "max_docs", getattr(ns, "batch_size", None))
    put("novelty", "min_size", getattr(ns, "novelty_min_size", None))
    put("novelty", "confirm_within", getattr(ns, "novelty_confirm_within", None))
    put("events", "assignments", getattr(ns, "emit_assignments", None))
    for name in _FIELD_FLAGS:
        put("fields", name, getattr(ns, f"field_{name}", None))
    put("limits", "max_doc_bytes", getattr(ns, "max_doc_bytes", None))
    put("limits", "max_consecutive_invalid", getattr(ns, "max_consecutive_invalid", None))
    put("state", "dir", getattr(ns, "state_dir", None))
    put("state", "snapshot_interval_s", getattr(ns, "snapshot_interval", None))
    put("state", "compact_vocabulary_at", getattr(ns, "compact_vocabulary_at", None))
    put("redis", "url", getattr(ns, "redis_url", None))
    put("redis", "replicas_to_ack", getattr(ns, "redis_replicas_to_ack", None))
    put("redis", "socket_timeout_s", getattr(ns, "redis_socket_timeout", None))
    put("redis", "writer_lease_ms", getattr(ns, "redis_writer_lease_ms", None))
    put(None, "metrics_port", getattr(ns, "metrics_port", None))
    put("kafka", "bootstrap_servers", getattr(ns, "kafka_bootstrap", None))
    put("kafka", "input_topic", getattr(ns, "input_topic", None))
    put("kafka", "group", getattr(ns, "group", None))
    put("kafka", "events_topic", getattr(ns, "events_topic", None))
    put("kafka", "dlq_topic", getattr(ns, "dlq_topic", None))
    put("kafka", "session_timeout_ms", getattr(ns, "session_timeout_ms", None))
    if getattr(ns, "accept_empty_state", False):
        put("kafka", "accept_empty_state", True)
    for key, value in kafka_security_overrides(ns).items():
        put("kafka", key, value)
    put(None, "dlq", getattr(ns, "dlq", None))
    put(None, "input", getattr(ns, "input", None))
    return o


def _settings(ns: argparse.Namespace) -> Settings:
    settings = load_settings(getattr(ns, "config", None), _overrides(ns))
    for warning in ignored_flags(ns, settings):
        sys.stderr.write(f"noveld: warning: {warning}\n")
    return settings


#: model flags that only some models read: settings key → (who reads it, whether these do)
_MODEL_ONLY: dict[str, tuple[str, Callable[[ModelSettings], bool]]] = {
    **dict.fromkeys(
        ("topics", "zeta", "gamma", "table_alpha", "context_prior", "use_context"),
        ("--model hdp", lambda m: m.kind == "hdp"),
    ),
    **dict.fromkeys(
        ("edcm_prior", "edcm_prior_docs"), ("--likelihood edcm", lambda m: m.likelihood == "edcm")
    ),
    **dict.fromkeys(
        ("embedding_dim", "vmf_cosine"), ("--likelihood vmf", lambda m: m.likelihood == "vmf")
    ),
    # hdp's category level has its own concentration (γ, --gamma); svi's local step its own
    # passes (model.local_sweeps)
    **dict.fromkeys(("alpha", "alpha_scaling"), ("--model dpmm or svi", lambda m: m.kind != "hdp")),
    "rejuvenation_sweeps": ("--model dpmm or hdp", lambda m: m.kind != "svi"),
}
_FLAG_OF = {key: flag for flag, key, _, _ in _MODEL_FLAGS} | {"use_context": "--use-context"}


def ignored_flags(ns: argparse.Namespace, settings: Settings) -> list[str]:
    """Flags given on the command line that these settings do not read (a model's flag with
    another model; state-dir snapshots with Redis), said rather than silently dropped."""
    m = settings.model
    said = []
    for key, (reader, reads) in _MODEL_ONLY.items():
        if getattr(ns, key, None) is not None and not reads(m):
            flag = "--ignore-context" if getattr(ns, key) is False else _FLAG_OF[key]
            by_likelihood = reader.startswith("--likelihood") and m.kind == "dpmm"  # else kind
            used = f"--likelihood {m.likelihood}" if by_likelihood else f"--model {m.kind}"
            said.append(f"{flag} is read by {reader} only; ignored with {used}")
    if settings.redis.url is not None:
        if getattr(ns, "snapshot_interval", None) is not None:
            said.append("--snapshot-interval is ignored with --redis-url (every batch commits)")
        if getattr(ns, "state_dir", None) is not None:
            kafka = settings.kafka.bootstrap_servers is not None  # dead letters to a topic
            where = "" if kafka or settings.dlq else " (the dead-letter file still goes there)"
            said.append(f"--state-dir holds no state with --redis-url (Redis does){where}")
    if settings.kafka.bootstrap_servers is not None and getattr(ns, "dlq", None) is not None:
        said.append("--dlq is ignored in Kafka mode (dead letters go to kafka.dlq_topic)")
    command = getattr(ns, "command", "run")
    if command in ("evaluate", "fit", "demo") and getattr(ns, "emit_assignments", None):
        flag = {"document": "--emit-assignments", "batch": "--emit-assignment-batches"}[
            ns.emit_assignments
        ]
        said.append(f"{flag} is read by noveld run only; noveld {command} emits no assignments")
    if command == "evaluate" and getattr(ns, "namespace", None):
        said.append("--namespace names a state; noveld evaluate keeps none")
    if settings.kafka.bootstrap_servers is None:
        given = [f"--{d.replace('_', '-')}" for d in _KAFKA_ONLY if getattr(ns, d, None)]
        if given:
            verb = "is" if len(given) == 1 else "are"
            said.append(f"{', '.join(given)} {verb} read in Kafka mode only (--kafka-bootstrap)")
    return said


#: flags (argparse dests) of ``run`` that only Kafka mode reads
_KAFKA_ONLY = (
    "group", "events_topic", "dlq_topic", "session_timeout_ms", "accept_empty_state",
    *KAFKA_SECURITY_FLAGS,
)  # fmt: skip


def _cmd_run(ns: argparse.Namespace) -> int:
    settings = _settings(ns)
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


def _cmd_config_show(ns: argparse.Namespace) -> int:
    settings = _settings(ns)
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


def _add_run_options(p: argparse.ArgumentParser) -> None:
    """``run``'s input, state, Redis, Kafka and metrics options (also ``config show``'s, so it
    shows what a given ``noveld run`` line will use)."""
    p.add_argument("--input", "-i", help="JSONL file, or - for stdin (default -)")
    p.add_argument("--state-dir", type=Path, help="directory for the state snapshot")
    p.add_argument(
        "--snapshot-interval",
        type=float,
        help="seconds between snapshots (default 5; 0 = every batch)",
    )
    p.add_argument(
        "--dlq",
        type=Path,
        help="dead-letter file (default <state-dir>/dlq.jsonl or ./noveld-dlq.jsonl)",
    )
    p.add_argument(
        "--redis-url",
        help="keep the state in Redis instead of --state-dir; --namespace names it. "
        "redis://[:password@]host:port/db (a server or a cluster's endpoint), rediss:// "
        "(TLS), or redis+sentinel://[:password@]host:port[,host:port...]/service[/db] "
        "(the primary Redis Sentinel names)",
    )
    p.add_argument(
        "--redis-replicas-to-ack",
        type=int,
        metavar="N",
        help="publish events only of commits N Redis replicas acknowledged (default 0; "
        "set it to the replica count of a Redis with failover)",
    )
    p.add_argument(
        "--redis-socket-timeout",
        type=float,
        metavar="SECONDS",
        help="longest wait for one Redis reply before Redis counts as unreachable and the "
        "daemon pauses and retries (default 10; a hung server or a silent network)",
    )
    p.add_argument(
        "--redis-writer-lease-ms",
        type=int,
        metavar="MS",
        help="svi (one writer per namespace): a crashed writer's lease lapses after this long "
        "and a standby replica takes over (default 10000)",
    )
    kg = p.add_argument_group("Kafka (production mode; needs --redis-url)")
    kg.add_argument(
        "--kafka-bootstrap",
        metavar="HOST:PORT",
        help="consume --input-topic instead of reading --input",
    )
    kg.add_argument("--input-topic", help="topic of input documents")
    kg.add_argument("--group", help="consumer group (default noveld)")
    kg.add_argument("--events-topic", help="topic for novelty events (default noveld.events)")
    kg.add_argument("--dlq-topic", help="topic for dead letters (default noveld.dlq)")
    kg.add_argument("--session-timeout-ms", type=int, help="consumer session timeout (10000)")
    kg.add_argument(
        "--accept-empty-state",
        action="store_true",
        help="start a namespace that has no offsets for the input topic although the consumer "
        "group has read it before (without it: exit 6, the state was probably lost)",
    )
    add_kafka_security_flags(kg)
    p.add_argument(
        "--metrics-port",
        type=int,
        help="serve /metrics, /healthz and /readyz on this port (0 = any free)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (also used to render docs)."""
    p = argparse.ArgumentParser(
        prog="noveld",
        description="Streaming Bayesian-nonparametric document clustering with novelty "
        "detection. Documents in (JSONL or Kafka), clusters and `cluster.born` "
        "events out.",
    )
    p.add_argument("--version", action="version", version=f"noveld {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="cluster a document stream and emit novelty events",
        description="Read JSONL documents (file or - for stdin), seat each in a cluster, write "
        "cluster.born / cluster.retired / cluster.merged events (and, on request, each "
        "document's cluster) as JSON lines on stdout and progress on stderr "
        "(docs/events.md). With --state-dir the state is snapshotted atomically and a "
        "second run resumes after the last committed line. With --kafka-bootstrap and "
        "--redis-url: the production daemon (docs/deployment.md).",
    )
    _add_run_options(run)
    run.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    _add_common(run)
    run.set_defaults(func=_cmd_run)

    from noveld.daemon.cli_tools import add_tool_commands

    add_tool_commands(sub, _add_common, _settings)
    from noveld.daemon.cli_fit import add_fit_command

    add_fit_command(sub, _add_common, _settings)
    from noveld.daemon.cli_state import add_state_commands

    add_state_commands(sub)
    from noveld.daemon.cli_produce import add_produce_command

    add_produce_command(sub)

    chk = sub.add_parser(
        "check",
        help="health check of a running daemon (exit 0 healthy, 1 not)",
        description=health.DESCRIPTION,
    )
    health.add_arguments(chk)
    chk.set_defaults(func=lambda ns: health.check(ns.metrics_port, ns.host, ns.ready))

    cfg = sub.add_parser("config", help="configuration tools")
    cfg_sub = cfg.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    show = cfg_sub.add_parser("show", help="print the effective configuration")
    show.add_argument("--json", action="store_true", help="JSON output")
    _add_run_options(show)
    _add_common(show)
    show.set_defaults(func=_cmd_config_show)
    return p


class _LogFormat(logging.Formatter):
    """A log record as the command line's other messages look: ``noveld: warning: …`` (a
    library's record also names its logger). A record's exception is named on the same line,
    never as a traceback: kafka-python logs a dropped broker connection with ``exc_info``, and
    an operator read a stack trace into a routine reconnect."""

    def format(self, record: logging.LogRecord) -> str:
        where = "" if record.name.startswith("noveld") else f"{record.name}: "
        text = f"noveld: {record.levelname.lower()}: {where}{record.getMessage()}"
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None:
            text += f" ({type(exc).__name__}: {exc})" if str(exc) else f" ({type(exc).__name__})"
        return text


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is when a record comes (a plain StreamHandler keeps
    the stream it was made with, e.g. a test's captured stderr long closed)."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def configure_logging(quiet: bool = False) -> None:
    """Log records to stderr, noveld's from INFO (``--quiet``: WARNING), libraries' from
    WARNING. Unconfigured, Python's last-resort handler printed bare messages without a level
    and dropped INFO (a vocabulary compaction went unsaid)."""
    root = logging.getLogger()
    if not any(isinstance(h.formatter, _LogFormat) for h in root.handlers):
        handler = _StderrHandler()
        handler.setFormatter(_LogFormat())
        root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > logging.WARNING:
        root.setLevel(logging.WARNING)
    logging.getLogger("noveld").setLevel(logging.WARNING if quiet else logging.INFO)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``noveld`` console script."""
    parser = build_parser()
    ns = parser.parse_args(argv)
    configure_logging(bool(getattr(ns, "quiet", False)))
    for name in unknown_env_names(os.environ):
        sys.stderr.write(
            f"noveld: warning: {name} names no setting and is ignored (nested settings take "
            "two underscores, e.g. NOVELD_STATE__DIR; docs/configuration.md)\n"
        )
    try:
        code: int = ns.func(ns)
        return code
    except UserError as exc:
        sys.stderr.write(f"noveld: error: {exc}\n")
        return EXIT_USAGE
    except StoreConflict as exc:  # read at start-up (run, state show, fit)
        sys.stderr.write(f"noveld: error: {state_damaged(exc)}\n")
        return EXIT_STATE_DAMAGED
    except ValidationError as exc:
        sys.stderr.write(f"noveld: error: invalid configuration:\n{_validation_text(exc)}\n")
        return EXIT_USAGE
    except (FileNotFoundError, ConfigError) as exc:
        sys.stderr.write(f"noveld: error: {exc}\n")
        return EXIT_USAGE
    except BrokenPipeError:
        # the reader of stdout went away (``noveld generate | head``): nothing more to write
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no shutdown flush error
        if ns.command != "run":
            return 0
        sys.stderr.write(
            "noveld: error: stdout was closed by its reader; stopped. Events not written yet "
            "stay in the saved state (--state-dir or --redis-url); the next run writes them "
            "first.\n"
        )
        return EXIT_IO
    except OSError as exc:  # an unwritable path, a full disk: the environment, not a bug
        sys.stderr.write(f"noveld: error: {exc}\n")
        return EXIT_IO
    except redis.RedisError as exc:  # Redis went away under a one-shot command (state, fit)
        sys.stderr.write(f"noveld: error: {outage_reason(exc)}\n")
        return EXIT_IO
    except KeyboardInterrupt:  # before the pipeline's own handler, or a one-shot command
        sys.stderr.write("noveld: interrupted\n")
        return EXIT_INTERRUPTED


def _validation_text(exc: ValidationError) -> str:
    lines = []
    for e in exc.errors():
        loc = ".".join(str(x) for x in e["loc"])
        lines.append(f"  {loc}: {e['msg']}")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
