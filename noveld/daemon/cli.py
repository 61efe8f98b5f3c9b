"""``noveld`` command line: the parser of every command, and the dispatch that turns bad
configuration, unreadable files and incompatible state into a one-line error and a non-zero
exit code — never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import redis
from pydantic import ValidationError

from noveld import __version__
from noveld.daemon import check as health
from noveld.daemon.cli_logging import configure_logging
from noveld.daemon.cli_options import add_common, add_run_options, settings_overrides
from noveld.daemon.cli_run import cmd_config_show, cmd_run
from noveld.daemon.cli_settings import ignored_flags, settings_from
from noveld.daemon.errors import UserError
from noveld.daemon.exits import EXIT_INTERRUPTED, EXIT_IO, EXIT_STATE_DAMAGED, EXIT_USAGE
from noveld.daemon.model_kinds import MODEL_FLAGS
from noveld.daemon.outage import outage_reason
from noveld.daemon.settings import ConfigError, unknown_env_names
from noveld.daemon.signals import loop_started
from noveld.daemon.stepping import state_damaged
from noveld.state.redis.reasons import StoreConflict

__all__ = ["build_parser", "configure_logging", "ignored_flags", "main"]

_overrides = settings_overrides  # the names tests and tools know
_MODEL_FLAGS = [(f.name, f.dest, f.options["type"], f.options["help"]) for f in MODEL_FLAGS]
"""The model's value flags as (flag, ``model.*`` setting, type, help)."""


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
    add_run_options(run)
    run.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    add_common(run)
    run.set_defaults(func=cmd_run)

    from noveld.daemon.cli_tools import add_tool_commands

    add_tool_commands(sub, add_common, settings_from)
    from noveld.daemon.cli_fit import add_fit_command

    add_fit_command(sub, add_common, settings_from)
    from noveld.daemon.cli_state import add_state_commands

    add_state_commands(sub)
    from noveld.daemon.cli_stories import add_stories_command

    add_stories_command(sub)
    from noveld.daemon.cli_produce import add_produce_command

    add_produce_command(sub)
    from noveld.daemon.cli_ui import add_ui_command

    add_ui_command(sub)

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
    add_run_options(show)
    add_common(show)
    show.set_defaults(func=cmd_config_show)
    return p


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
            f"noveld: error: stdout was closed by its reader; stopped. {_unwritten(ns)}\n"
        )
        return EXIT_IO
    except OSError as exc:  # an unwritable path, a full disk: the environment, not a bug
        sys.stderr.write(f"noveld: error: {exc}\n")
        return EXIT_IO
    except redis.RedisError as exc:  # Redis went away under a one-shot command (state, fit)
        sys.stderr.write(f"noveld: error: {outage_reason(exc)}\n")
        return EXIT_IO
    except KeyboardInterrupt:  # before the pipeline's own handler, or a one-shot command
        if ns.command == "run" and not loop_started():
            sys.stderr.write("noveld: interrupted while starting; nothing was read or written\n")
        else:
            sys.stderr.write("noveld: interrupted\n")
        return EXIT_INTERRUPTED


def _unwritten(ns: argparse.Namespace) -> str:
    """What became of the events a run could not write: kept in its saved state, or lost when
    it saves none (no ``--state-dir``, no ``--redis-url``)."""
    try:
        settings = settings_from(ns)
        saved = settings.redis.url is not None or settings.state.dir is not None
    except Exception:  # the settings were read once already; say the cautious thing
        saved = False
    if saved:
        return (
            "Events not written yet stay in the saved state (--state-dir or --redis-url); the "
            "next run writes them first."
        )
    return (
        "No state is saved (no --state-dir or --redis-url), so the events not written are "
        "lost and a new run starts again from the first line; give --state-dir to keep them."
    )


def _validation_text(exc: ValidationError) -> str:
    lines = []
    for e in exc.errors():
        loc = ".".join(str(x) for x in e["loc"])
        lines.append(f"  {loc}: {e['msg']}")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
