"""Owned server processes for the tests: start, signal, clean up, and kill leftovers at exit;
shared by every server kind so each kills exactly the process it started."""

from __future__ import annotations

import atexit
import contextlib
import shutil
import signal
import subprocess
import tempfile
import weakref
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Self

import pytest

# Signals after which the process keeps existing (so waiting for it would hang).
_NON_TERMINATING = frozenset({signal.SIGSTOP, signal.SIGCONT, signal.SIGTSTP})

# Owned processes still alive, killed at interpreter exit if a fixture never tore down.
_LIVE: weakref.WeakSet[OwnedProcess] = weakref.WeakSet()


class Started:
    """``with X() as x``: ``start()`` on entry, ``stop()`` on exit (whatever the outcome)."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _tail(path: Path, chars: int = 4000) -> str:
    """The end of a log file, or a note that there is none."""
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return f"(no log at {path})"


def _die_with_parent() -> list[str]:
    """A prefix that makes the server get SIGKILL when the thread that started it dies, so a
    test run killed before teardown leaves no servers behind. ``setpriv`` (util-linux) sets
    the parent-death signal and execs the server, so ``proc.pid`` is still the server's pid
    (unlike ``preexec_fn``, it is safe with the threads kafka-python starts). Caveat: start
    servers from the main thread, or one that outlives them."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []


class OwnedProcess:
    """A child process and its log file; the signal/wait/cleanup shared by both servers."""

    def __init__(self, name: str) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix=f"noveld-{name}-")
        self.dir = Path(self._tmp.name)
        self.log_path = self.dir / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def _spawn(self, args: Sequence[str], env: dict[str, str] | None = None) -> None:
        """Start the child with stdout and stderr appended to the log (kept across restarts)."""
        if self.running:
            raise RuntimeError(f"already running (pid {self.pid})")
        if self._log is None:
            self._log = self.log_path.open("ab")
        self._log.write(f"\n=== start: {' '.join(args)}\n".encode())
        self._log.flush()
        self.proc = subprocess.Popen(
            [*_die_with_parent(), *args],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=self.dir,
            env=env,
        )
        _LIVE.add(self)

    @property
    def running(self) -> bool:
        """Whether the process we started exists (a SIGSTOPped one counts as running)."""
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        """pid of the process we started, if any."""
        return None if self.proc is None else self.proc.pid

    def log(self, chars: int = 4000) -> str:
        """The end of the server's output, for error messages."""
        if self._log is not None:
            self._log.flush()
        return _tail(self.log_path, chars)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to exactly the process we started; wait for it unless it only pauses."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(sig)
        if sig not in _NON_TERMINATING:
            if sig != signal.SIGKILL and self._stopped():
                self.proc.send_signal(signal.SIGCONT)  # a stopped process can't act on SIGTERM
            self.proc.wait(timeout=30)

    def _stopped(self) -> bool:
        """Whether the process is SIGSTOPped (state T in /proc)."""
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return False
        return stat.rsplit(")", 1)[-1].split()[0] in ("T", "t")

    def _cleanup(self) -> None:
        """Kill the process, close the log and remove the temp dir."""
        self.kill(signal.SIGKILL)
        if self._log is not None:
            self._log.close()
            self._log = None
        self._tmp.cleanup()
        _LIVE.discard(self)


@atexit.register
def _kill_leftovers() -> None:
    """Last resort: don't leave servers behind if a test run dies before teardown."""
    for owned in list(_LIVE):
        with contextlib.suppress(Exception):
            owned.kill(signal.SIGKILL)


def skip_not_owned(what: str, env: str, action: str) -> None:
    pytest.skip(f"{env} points at an external {what}, which this test may not {action}")
