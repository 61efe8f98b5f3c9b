"""Shared helpers for the benchmark scripts: data loading and machine description."""

from __future__ import annotations

import argparse
import json
import os
import platform
from pathlib import Path

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "news.jsonl"

ASSIGNMENT_FLAGS = {"document": "--emit-assignments", "batch": "--emit-assignment-batches"}
"""The daemon flag for each ``--emit-assignments`` choice of the end-to-end benchmarks."""


def add_assignment_option(parser: argparse.ArgumentParser) -> None:
    """``--emit-assignments [batch]``: run the daemon with one of the assignment event forms."""
    parser.add_argument(
        "--emit-assignments",
        nargs="?",
        const="document",
        choices=sorted(ASSIGNMENT_FLAGS),
        help=(
            "the daemon also emits each document's cluster: a document.assigned event per "
            "document (default) or, with 'batch', a documents.assigned event per batch"
        ),
    )


def machine() -> str:
    """One line describing where the numbers were taken."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def load_texts(path: Path) -> list[dict[str, object]]:
    """All JSON lines of a file."""
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]
