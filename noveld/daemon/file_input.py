"""Opening a file or stdin input: where it resumes, and the checks that it is the input the
state was built from (not changed, rotated, renamed or cut short); the svi writer lease a
file run takes."""

from __future__ import annotations

import os

from noveld.connectors.jsonl import JsonlSource
from noveld.connectors.timed_source import TimedSource
from noveld.daemon.errors import UserError
from noveld.daemon.lease import WriterLease
from noveld.daemon.settings import Settings
from noveld.state.redis.store import RedisStore


def source_name(input_path: str) -> str:
    """Offsets key of an input: the path as given (``-`` for stdin), as in record positions."""
    return input_path


def input_name(input_path: str) -> str:
    """How messages name an input: ``stdin`` for ``-``, else its path."""
    return "stdin" if input_path == "-" else input_path


def same_file_as(input_path: str, offsets: dict[str, int]) -> tuple[str, int] | None:
    """Another spelling of ``input_path`` (``./news.jsonl`` for ``news.jsonl``) with committed
    lines in ``offsets``, and how many; None if there is none (or the input is stdin)."""
    if input_path == "-":
        return None
    for key, committed in sorted(offsets.items()):
        path, _, partition = key.rpartition(":")
        if path in ("", "-", input_path) or partition != "0" or committed <= 0:
            continue
        try:
            if os.path.samefile(path, input_path):
                return path, committed
        except OSError:  # not a file here (a Kafka topic, a file since removed)
            continue
    return None


def renamed_from(
    input_path: str, inputs: dict[str, dict[str, int]], offsets: dict[str, int]
) -> tuple[str, int] | None:
    """Another file input of the state whose committed lines this file begins with — the same
    file renamed (``feed.jsonl`` rotated to ``feed.jsonl.1``), which read as a new input would
    be counted twice — and how many lines; None if there is none. One pass over the file's
    first lines, up to the longest such prefix."""
    wanted: dict[int, list[str]] = {}
    for key, kept in inputs.items():
        path, _, partition = key.rpartition(":")
        if path not in ("", "-") and partition == "0" and 0 < kept["offset"] == offsets.get(key):
            wanted.setdefault(kept["offset"], []).append(key)
    if not wanted or input_path == "-":
        return None
    try:
        source = JsonlSource(input_path)
    except OSError:
        return None  # open_source names the problem
    try:
        if not source.rereadable:
            return None
        for n in sorted(wanted):
            if not source.skip_to(n):
                return None
            for key in wanted[n]:
                if inputs[key]["crc32"] == source.checksum:
                    return key.rpartition(":")[0], n
    finally:
        source.close()
    return None


def open_source(
    settings: Settings, input_path: str, start: int, committed: dict[str, int] | None = None
) -> JsonlSource | TimedSource:
    """The input from line ``start`` on; stdin's reads close a batch after ``max_wait_ms``.
    ``committed`` is the checksum the state keeps of the input's lines (``offset``, ``crc32``):
    when it covers exactly the lines skipped to ``start``, they must match it."""
    try:
        base = JsonlSource(
            input_path, start_offset=start, max_line_bytes=settings.limits.max_doc_bytes
        )
    except OSError as exc:
        raise UserError(f"cannot read input {input_path}: {exc}") from exc
    if (
        committed is not None
        and committed["offset"] == start == base.next_offset
        and base.checksum != committed["crc32"]
    ):
        base.close()
        raise UserError(_changed_input(input_path, start))
    if base.next_offset < start:  # fewer lines than the state has committed from it
        base.close()
        if not base.rereadable:
            where = input_name(input_path)
            raise UserError(
                f"{where} ended after {base.next_offset:,} lines but the state already holds "
                f"lines 1 to {start:,} of it: another stream, or the same one cut short, so "
                "nothing was read. A different stream needs its own --state-dir (with "
                "--redis-url, its own --namespace)"
            )
        raise UserError(
            f"{input_path} has {base.next_offset:,} complete lines but the state already holds "
            f"lines 1 to {start:,} of it: this is not the file the state was built from "
            f"(truncated, rotated or replaced?). {_NEW_FILE_ADVICE.format(input_path)}"
        )
    if not base.rereadable:  # stdin, a pipe, a device: read by a thread, never blocking
        return TimedSource(base, settings.batch.max_wait_ms / 1000)
    return base


def _changed_input(input_path: str, lines: int) -> str:
    """Why a run refuses to resume an input whose first lines are not the ones committed."""
    if input_path == "-":
        return (
            f"the first {lines:,} lines of stdin are not the lines this state holds from stdin "
            "(their checksum differs): a different stream on stdin needs its own --state-dir "
            "(with --redis-url, its own --namespace), or the same stream must be given again "
            "to resume"
        )
    return (
        f"the first {lines:,} lines of {input_path} are not the lines the state holds from it "
        "(their checksum differs): the file was changed, rotated or replaced since. "
        + _NEW_FILE_ADVICE.format(input_path)
    )


_NEW_FILE_ADVICE = (
    "Give a new file its own --state-dir (with --redis-url, its own --namespace), or read it "
    "into this model from its start: `noveld state set-offset {}:0 0` with this run's "
    "--state-dir (or --redis-url and --namespace)"
)


def take_file_runs_lease(store: RedisStore, settings: Settings) -> tuple[WriterLease | None, bool]:
    """svi keeps one writer per namespace: a file or stdin run takes the writer
    lease, or is refused while another writer (a daemon, another run) holds it. Also whether
    the state must be loaded again (a writer committed between the load and the lease)."""
    if settings.model.kind != "svi":
        return None, False
    lease = WriterLease(store, settings.redis.writer_lease_ms)
    holder = lease.try_take()
    if holder is not None:
        raise UserError(
            f"writer {holder} holds the svi writer lease of namespace {settings.namespace!r} "
            "(a running svi daemon or run): svi's global step does not commute, so one process "
            "at a time steps a namespace's model. Stop it first, or give another --namespace"
        )
    return lease, lease.hold()
