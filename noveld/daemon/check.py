"""``noveld check``: the health check a container ``HEALTHCHECK`` or a probe runs every few
seconds. Standard library only, and reached before the command line's imports
(:mod:`noveld.launch`): through the whole command line each check took ~2.8 s and ~126 MiB
(numpy, numba), against a 5 s timeout every 15 s."""

from __future__ import annotations

import argparse
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence

DESCRIPTION = (
    "GET /healthz (or /readyz with --ready) of a daemon started with --metrics-port; for "
    "container HEALTHCHECKs and probes."
)


def port(text: str) -> int:
    """A TCP port, 1–65535 (argparse type)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (1-65535)")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``--metrics-port``, ``--host``, ``--ready``."""
    p.add_argument("--metrics-port", type=port, required=True, help="the daemon's --metrics-port")
    p.add_argument("--host", default="127.0.0.1", help="the daemon's host (default 127.0.0.1)")
    p.add_argument("--ready", action="store_true", help="check /readyz instead")


def check(metrics_port: int, host: str = "127.0.0.1", ready: bool = False) -> int:
    """0 when the endpoint answers 200, else 1 with the reason on stderr (a 503's body)."""
    path = "/readyz" if ready else "/healthz"
    url = f"http://{host}:{metrics_port}{path}"
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            ok = resp.status == 200
    except urllib.error.HTTPError as exc:  # 503: the body says why ("not ready: …")
        why = exc.read().decode(errors="replace").strip()[:500]
        sys.stderr.write(f"noveld check: {path} failing (HTTP {exc.code}): {why}\n")
        return 1
    except (urllib.error.URLError, OSError) as exc:
        sys.stderr.write(f"noveld check: {url}: {exc}\n")
        return 1
    print(f"noveld check: {path} {'ok' if ok else 'failing'}")
    return 0 if ok else 1


def main(argv: Sequence[str]) -> int:
    """``noveld check ARGS`` on its own (the launcher's fast path)."""
    parser = argparse.ArgumentParser(prog="noveld check", description=DESCRIPTION)
    add_arguments(parser)
    ns = parser.parse_args(argv)
    return check(ns.metrics_port, ns.host, ns.ready)
