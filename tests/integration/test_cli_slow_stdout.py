"""SIGTERM while stdout is a full pipe (a slow reader) must not lose events: with
``PYTHONUNBUFFERED=1`` (the container image's setting) a write(2) a signal interrupts returns
the bytes written so far, and Python's text layer dropped the rest of the batch's events after
their commit had taken them out of the outbox."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from cli_runner import NOVELD

from noveld.synth import SynthConfig, write_jsonl


def blocked_writing(pid: int) -> bool:
    """Whether the process sleeps in a pipe write (Linux's /proc wchan)."""
    try:
        return "pipe_write" in Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return False


def signal_pending(pid: int, sig: int) -> bool:
    """Whether ``sig`` still waits to be delivered to the process (its /proc status masks)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    masks = [ln.split()[1] for ln in status.splitlines() if ln.startswith(("SigPnd", "ShdPnd"))]
    return any(int(mask, 16) >> (sig - 1) & 1 for mask in masks)


def test_sigterm_while_the_reader_is_slow_delivers_every_committed_event(tmp_path: Path) -> None:
    docs = tmp_path / "docs.jsonl"
    n = write_jsonl(SynthConfig(n_docs=3000, n_stories=20, seed=5), docs)
    state = tmp_path / "state"
    run = [*NOVELD, "run", "--input", str(docs), "--state-dir", str(state), "--emit-assignments"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(run, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    deadline = time.monotonic() + 120
    while not blocked_writing(proc.pid):  # the pipe (64 KiB) filled up: nobody reads it yet
        assert proc.poll() is None and time.monotonic() < deadline, "never blocked on stdout"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    while signal_pending(proc.pid, signal.SIGTERM):  # delivered: the blocked write returns short
        assert time.monotonic() < deadline, "SIGTERM never delivered"
        time.sleep(0.01)
    first = proc.stdout.read()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    assert first.endswith(b"\n"), "a torn last line"
    second = subprocess.run(run, capture_output=True, timeout=300, env=env)
    assert second.returncode == 0, second.stderr.decode()
    offsets = [
        e["position"]["offset"]
        for e in map(json.loads, (first + second.stdout).splitlines())
        if e["type"] == "document.assigned"
    ]
    assert sorted(set(offsets)) == list(range(n))  # every document's event, none lost


def test_sigterm_on_stdin_processes_the_lines_already_read(tmp_path: Path) -> None:
    """The reader thread takes lines from the pipe ahead of the pipeline (up to 10,000); a
    graceful stop used to drop that read-ahead silently — lines the producer saw consumed,
    neither clustered nor dead-lettered, and not in the pipe for anyone else. They are now
    processed before the final snapshot, and the stop says how many."""
    docs = tmp_path / "docs.jsonl"
    n = write_jsonl(SynthConfig(n_docs=3000, n_stories=20, seed=6), docs)
    state = tmp_path / "state"
    proc = subprocess.Popen(
        [*NOVELD, "run", "--input", "-", "--state-dir", str(state), "--batch-size", "64"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "NOVELD_PROGRESS_INTERVAL_S": "0.01"},
    )
    assert proc.stdin is not None and proc.stderr is not None
    proc.stdin.write(docs.read_bytes())  # returns once the pipe took it all; stdin stays open,
    proc.stdin.flush()  # as a live producer's does
    line = proc.stderr.readline()
    while b" docs (" not in line:  # the first batch's progress: the pipeline is under way
        assert line, "no progress line"
        line = proc.stderr.readline()
    proc.send_signal(signal.SIGTERM)
    err = proc.stderr.read().decode()
    proc.wait(timeout=60)
    proc.stdin.close()
    assert proc.returncode == 0, err
    shown = subprocess.run([*NOVELD, "state", "show", "--state-dir", str(state), "--json"],
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    assert json.loads(shown.stdout)["offsets"] == {"-:0": n}, err
    assert "lines already read from stdin" in err
