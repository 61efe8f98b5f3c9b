"""One process at a time per state directory: an advisory ``flock`` on ``<dir>/.lock``.

Two processes snapshotting one directory would overwrite each other's state: the documents the
one committed would be gone from the other's snapshot, read again on the next run and counted
twice. The lock is taken for as long as a run (or an operator's tool that rewrites the snapshot)
uses the directory, and the kernel drops it with the process, so a run killed with SIGKILL
leaves nothing to clean up.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_NAME = ".lock"


class StateDirBusy(RuntimeError):
    """Another process holds the state directory."""


def _holder(fd: int) -> str:
    """The pid the holder wrote into the lock file, for the message ("" if unknown)."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return ""
    return f" (pid {text})" if text.isdigit() else ""


@contextmanager
def hold_state_dir(state_dir: Path) -> Iterator[None]:
    """Hold ``state_dir`` exclusively while the block runs; ``StateDirBusy`` at once if another
    process holds it (never waits: a second run on one directory is a mistake, not a queue).
    Creates the directory if needed; ``OSError`` if it cannot."""
    state_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(state_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StateDirBusy(
                f"state dir {state_dir} is in use by another noveld process{_holder(fd)}: two "
                "processes on one state dir would overwrite each other's snapshots (and count "
                "documents twice). Stop that process first, or give this one its own --state-dir"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock
