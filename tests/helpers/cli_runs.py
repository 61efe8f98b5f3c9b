"""Runs of the `noveld` CLI that several test modules make: generated streams, a state's
summary, the events of a run, seeded runs and SIGKILL chaos against a clean run."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from cli_runner import NOVELD, noveld

from noveld.state.memory import SNAPSHOT_NAME, read_snapshot


def generated(path: Path, docs: int, seed: int, stories: int = 30, *options: str) -> Path:
    """``noveld generate``: ``docs`` documents of ``stories`` stories from ``seed`` into
    ``path`` (``options``: more of its flags)."""
    out = noveld(
        "generate", "--docs", str(docs), "--stories", str(stories), "--stream-seed", str(seed),
        *options, "--out", str(path),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return path


def state_show(state_dir: Path) -> dict[str, Any]:
    """``noveld state show --json`` of a state directory."""
    out = noveld("state", "show", "--state-dir", str(state_dir), "--json")
    assert out.returncode == 0, out.stderr
    info: dict[str, Any] = json.loads(out.stdout)
    return info


def events_of(text: str) -> list[dict[str, Any]]:
    """The JSON events of a run's stdout, one a line."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def seeded_runs(
    source: Path, tmp_path: Path, seed: int, extra: tuple[str, ...] = ()
) -> list[tuple[str, list[str]]]:
    """Run ``source`` twice, sampled seating with ``seed`` (and ``extra`` flags), into two
    fresh state directories; returns each run's (state digest, event ids)."""
    return [seeded_run(source, tmp_path / name, seed, extra) for name in ("a", "b")]


def seeded_run(
    source: Path, state_dir: Path, seed: int, extra: tuple[str, ...] = ()
) -> tuple[str, list[str]]:
    """One sampled-seating run of ``source`` with ``seed`` into a fresh ``state_dir``: its
    (state digest, event ids)."""
    out = noveld(
        "run", "--input", str(source), "--state-dir", str(state_dir), "--seed", str(seed),
        "--sampled", *extra,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return state_show(state_dir)["digest"], [e["event_id"] for e in events_of(out.stdout)]


def kill_resume(
    big_stream: Path,
    st: Path,
    kills: int,
    total: int,
    model: str = "dpmm",
    extra: tuple[str, ...] = (),
    pause: tuple[float, float] = (0.1, 1.0),
    seed: int = 1,
) -> list[dict[str, Any]]:
    """SIGKILL the daemon at random points (``pause`` seconds after a snapshot that made
    progress), then run to the end of the ``total``-document stream; returns every event."""
    events: list[dict[str, Any]] = []
    rnd = random.Random(seed)
    for _ in range(kills):
        proc = subprocess.Popen(
            [
                *NOVELD,
                "run",
                "--input",
                str(big_stream),
                "--state-dir",
                str(st),
                "--snapshot-interval",
                "0",
                "--quiet",
                "--model",
                model,
                *extra,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        # read stdout as it comes, as a consumer does: a full pipe would stall the daemon
        chunks: list[str] = []
        reader = threading.Thread(target=lambda p=proc, c=chunks: c.append(p.stdout.read()))
        reader.start()
        deadline = time.monotonic() + 60
        start_docs = snapshot_docs(st)
        while time.monotonic() < deadline:  # read in-process: a `state show` takes ~1 s, and
            if snapshot_docs(st) > start_docs:  # the run may finish meanwhile
                break
            time.sleep(0.05)
        time.sleep(rnd.uniform(*pause))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        reader.join(timeout=30)
        out = "".join(chunks)
        assert proc.returncode == -signal.SIGKILL  # really killed, not finished
        assert state_show(st)["docs"] < total
        events += events_of(out.rsplit("\n", 1)[0] if not out.endswith("\n") else out)
    final = noveld(
        "run", "--input", str(big_stream), "--state-dir", str(st), "--quiet", "--model", model,
        *extra,
    )  # fmt: skip
    assert final.returncode == 0, final.stderr
    return events + events_of(final.stdout)


def snapshot_docs(state_dir: Path) -> int:
    """Documents in the state dir's last snapshot (0 before the first)."""
    path = state_dir / SNAPSHOT_NAME
    return read_snapshot(path)[0].counters.get("docs", 0) if path.exists() else 0


def assert_kills_match_a_clean_run(
    source: Path,
    tmp_path: Path,
    total: int,
    model: str = "dpmm",
    extra: tuple[str, ...] = (),
    pause: tuple[float, float] = (0.1, 1.0),
    seed: int = 1,
) -> dict[str, Any]:
    """Crash safety on the embedded store: a clean run of ``source``, then three SIGKILLs after
    snapshots and a resume (:func:`kill_resume`) on another state directory. Both count every
    document once, reach the same state hash and announce the same births (stable ids: nothing
    missing, no strays). Returns the killed-and-resumed state's summary."""
    args = ("--quiet", "--model", model, *extra)
    clean = noveld("run", "--input", str(source), "--state-dir", str(tmp_path / "clean"), *args)
    assert clean.returncode == 0, clean.stderr
    clean_info = state_show(tmp_path / "clean")
    events = kill_resume(
        source, tmp_path / "chaos", 3, model=model, extra=extra, total=total, pause=pause,
        seed=seed,
    )  # fmt: skip
    info = state_show(tmp_path / "chaos")
    assert info["docs"] == total
    assert info["mass"] == pytest.approx(clean_info["mass"])
    assert info["offsets"] == {f"{source}:0": total}
    assert info["digest"] == clean_info["digest"]  # deterministic mode: same model as clean run
    clean_born = {e["event_id"] for e in events_of(clean.stdout) if e["type"] == "cluster.born"}
    assert {e["event_id"] for e in events if e["type"] == "cluster.born"} == clean_born
    return info
