"""Shared helpers for the benchmark scripts: data loading and machine description."""

from __future__ import annotations

import argparse
import json
import os
import platform
from pathlib import Path

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "news.jsonl"
"""The labelled news stream the numbers in docs/benchmarks.md were measured on; it is not part
of the repository (a clone has none), so elsewhere ``--data FILE`` names a JSONL file of
documents (``id``, ``text``; ``label`` for the quality scripts)."""


def data_file(text: str) -> Path:
    """``--data``'s type: an existing file, or argparse's one-line error saying what to pass."""
    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(
            f"no data file at {path}: pass --data FILE, a JSONL file of documents (id, text, "
            "label), e.g. one written by `noveld generate` (docs/benchmarks.md names the file "
            "its numbers come from)"
        )
    return path


def add_data_option(parser: argparse.ArgumentParser) -> None:
    """``--data FILE`` (default: :data:`DEFAULT_DATA`, checked like any value given)."""
    parser.add_argument(
        "--data",
        type=data_file,
        default=str(DEFAULT_DATA),
        help=f"JSONL documents to run on (default: {DEFAULT_DATA})",
    )


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
