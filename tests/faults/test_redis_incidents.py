"""Redis incidents an operator meets besides an outage (real valkey, each test its own server):
a Redis at its maxmemory refusing writes (waited out, named, nothing lost or counted twice), a
namespace flushed under a running daemon (stopped with exit 6 and what to do), a damaged
namespace at start-up (exit 6, no traceback), and servers that cannot hold the state — a
read-only replica, an evicting ``maxmemory-policy`` — refused at start-up with exit 2, and one
that would forget acknowledged commits in a crash, named at start-up."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import redis
from cli_runner import NOVELD, noveld, redis_state
from servers.redis_server import RedisServer

from noveld.state.redis.store import RedisStore
from noveld.synth import SynthConfig, write_jsonl

pytestmark = [pytest.mark.integration, pytest.mark.faults]
N = 60_000


@pytest.fixture(scope="module")
def stream(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "s.jsonl"
    write_jsonl(SynthConfig(n_docs=N, n_stories=100, seed=21), path)
    return path


class Running:
    """``noveld run`` over a file into Redis, its stderr collected line by line as it comes."""

    def __init__(self, stream: Path, url: str, ns: str, dlq: Path) -> None:
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [*NOVELD, "run", "--input", str(stream), "--redis-url", url, "--namespace", ns,
             "--batch-size", "64", "--dlq", str(dlq)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "NOVELD_PROGRESS_INTERVAL_S": "0.05"},
        )  # fmt: skip
        assert self.proc.stderr is not None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def said(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def finish(self, timeout: float = 240) -> tuple[int, str]:
        code = self.proc.wait(timeout=timeout)
        self._reader.join(5)
        return code, "".join(self.lines)


def wait_until(check: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_redis_out_of_memory_is_waited_out_and_nothing_is_lost(
    stream: Path, tmp_path: Path
) -> None:
    with RedisServer() as server:
        r = redis.Redis.from_url(server.url)
        run = Running(stream, server.url, "oom", tmp_path / "d.jsonl")
        wait_until(lambda: run.said("docs"), 60, "the run to be under way")
        r.config_set("maxmemory", int(r.info("memory")["used_memory"]) // 2)  # noeviction
        wait_until(lambda: run.said("Redis is out of memory"), 30, "the OOM to be named")
        time.sleep(1.0)
        assert run.proc.poll() is None  # waiting, not crashed
        r.config_set("maxmemory", 0)
        code, err = run.finish()
        assert code == 0, err
        assert "Traceback" not in err and "Redis is back" in err
        info = redis_state(server.url, "oom")
        assert info["docs"] == N and info["offsets"] == {f"{stream}:0": N}
        assert info["mass"] == pytest.approx(N)  # each document once in the statistics


def test_a_namespace_flushed_under_a_running_daemon_stops_it_with_exit_6(
    stream: Path, tmp_path: Path
) -> None:
    with RedisServer() as server:
        run = Running(stream, server.url, "wiped", tmp_path / "d.jsonl")
        wait_until(lambda: run.said("docs"), 60, "the run to be under way")
        redis.Redis.from_url(server.url).flushdb()
        code, err = run.finish()
        assert code == 6, err
        assert "has no meta key any more" in err and "state import" in err
        assert "noveld: stopped (6)" in err and "noveld: done" not in err  # not "done"
        assert "Traceback" not in err


@pytest.mark.parametrize(
    ("key", "named"),
    [
        ("log", "log ends at 0"),  # the delta log: meta counts commits it lacks
        ("offsets", "its offsets key is gone"),  # the file would be read again: twice counted
        ("vocab", "its vocab key is gone"),  # word ids would be handed out again
        ("uidnext", "its uidnext key is gone"),  # cluster uids would be handed out again
    ],
)
def test_a_damaged_namespace_is_named_at_start_up(
    stream: Path, tmp_path: Path, key: str, named: str
) -> None:
    """Before, a deleted offsets key made the next run read the file again from line 1 (docs
    counted twice, exit 0), a deleted vocab mixed words up, a deleted uidnext reused uids."""
    with RedisServer() as server:
        small = tmp_path / "small.jsonl"
        small.write_text("".join(stream.read_text().splitlines(keepends=True)[:3000]))
        args = ["--redis-url", server.url, "--namespace", "dmg"]
        ok = noveld("run", "--input", str(small), *args, "--batch-size", "64", "--quiet",
                    "--dlq", str(tmp_path / "d.jsonl"))  # fmt: skip
        assert ok.returncode == 0, ok.stderr
        redis.Redis.from_url(server.url).delete(f"noveld:{{dmg}}:{key}")
        for cmd in (["run", "--input", str(small), *args, "--dlq", str(tmp_path / "d2.jsonl")],
                    ["state", "show", *args]):  # fmt: skip
            proc = noveld(*cmd)
            assert proc.returncode == 6, proc.stderr
            assert "gone or damaged" in proc.stderr and named in proc.stderr, proc.stderr
            assert "Traceback" not in proc.stderr


def test_a_vocabulary_deleted_under_a_running_daemon_stops_it(stream: Path, tmp_path: Path) -> None:
    with RedisServer() as server:
        run = Running(stream, server.url, "novocab", tmp_path / "d.jsonl")
        wait_until(lambda: run.said("docs"), 60, "the run to be under way")
        redis.Redis.from_url(server.url).delete("noveld:{novocab}:vocab")
        code, err = run.finish()
        assert code == 6, err
        assert "its vocab key is gone" in err and "Traceback" not in err


def test_servers_that_cannot_hold_the_state_are_refused_at_start_up(
    stream: Path, tmp_path: Path
) -> None:
    args = ["run", "--input", str(stream), "--namespace", "n", "--dlq", str(tmp_path / "d")]
    with RedisServer() as primary, RedisServer() as server:
        r = redis.Redis.from_url(server.url)
        r.config_set("maxmemory-policy", "allkeys-lru")
        evicting = noveld(*args, "--redis-url", server.url)
        assert evicting.returncode == 2, evicting.stderr
        assert "allkeys-lru evicts any key" in evicting.stderr
        r.config_set("maxmemory-policy", "volatile-lru")  # noveld's keys carry no TTL: fine
        r.execute_command("REPLICAOF", "127.0.0.1", str(primary.port))
        replica = noveld(*args, "--redis-url", server.url)
        assert replica.returncode == 2, replica.stderr
        assert f"read-only replica of 127.0.0.1:{primary.port}" in replica.stderr
        for proc in (evicting, replica):
            assert "Traceback" not in proc.stderr
        assert not redis.Redis.from_url(primary.url).keys("noveld:*")  # nothing was written


def test_a_server_that_would_forget_commits_is_named_at_start_up(tmp_path: Path) -> None:
    """A crash of a Redis without ``appendfsync always`` takes acknowledged commits with it:
    one start-up warning says how much and what it costs; a server that keeps every commit
    gets none."""
    small = tmp_path / "small.jsonl"
    write_jsonl(SynthConfig(n_docs=300, n_stories=5, seed=3), small)
    args = ["run", "--input", str(small), "--dlq", str(tmp_path / "d")]
    with RedisServer() as server:  # the harness runs AOF everysec
        r = redis.Redis.from_url(server.url)
        store = RedisStore(r, "probe")
        everysec = noveld(*args, "--redis-url", server.url, "--namespace", "a")
        assert everysec.returncode == 0, everysec.stderr
        warned = [ln for ln in everysec.stderr.splitlines() if ln.startswith("noveld: warning")]
        assert len(warned) == 1 and "appendfsync everysec" in warned[0], everysec.stderr
        assert "appendfsync always avoids this" in warned[0]

        r.config_set("appendfsync", "always")
        always = noveld(*args, "--redis-url", server.url, "--namespace", "b")
        assert always.returncode == 0 and "noveld: warning" not in always.stderr, always.stderr
        assert store.persistence_risk() is None

        r.config_set("appendonly", "no")
        r.config_set("save", "60 1")
        assert "RDB snapshots only" in str(store.persistence_risk())
        r.config_set("save", "")
        assert "persists nothing" in str(store.persistence_risk())


def test_a_redis_flapping_at_its_maxmemory_is_retried_with_a_backoff_kept_across_outages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Redis at the edge of its maxmemory answers the small write probe and then refuses the
    commit (OOM), outage after outage. Each outage used to start its backoff again at 0.1 s,
    so the whole namespace was reloaded ten times a second for as long as it flapped (the
    Redis audit counted 15 reloads in 6 s). The run's backoff now grows across outages until a
    commit lands, and nothing is lost or counted twice. The flapping is the server's own: its
    maxmemory is lifted while the daemon waits and set again as soon as the probe got through
    (seen on MONITOR), so the next write is refused, six times; then it stays lifted."""
    from noveld.daemon import outage
    from noveld.daemon.embedded import run_file
    from noveld.daemon.settings import load_settings
    from noveld.daemon.sinks import CollectingEvents

    path = tmp_path / "s.jsonl"
    write_jsonl(SynthConfig(n_docs=2_000, n_stories=20, seed=5), path)
    delays: list[float] = []
    real_delay = outage.Backoff.delay
    full_after_probe = threading.Event()

    with RedisServer() as server:
        admin = redis.Redis.from_url(server.url)
        watching = threading.Event()

        def fill_up_after_the_probe() -> None:
            """At maxmemory again right after the daemon's write probe went through."""
            watcher = redis.Redis.from_url(server.url)
            try:
                with redis.Redis.from_url(server.url).monitor() as monitor:
                    watching.set()
                    for seen in monitor.listen():
                        command = str(seen["command"])
                        if (
                            full_after_probe.is_set()
                            and command.startswith("SET ")
                            and (":probe" in command)
                        ):
                            watcher.config_set("maxmemory", 1)  # noeviction: writes refused
                            full_after_probe.clear()
            except redis.ConnectionError:  # the server stopped: the test is over
                pass

        def recorded(self: outage.Backoff) -> float:
            delays.append(real_delay(self))
            admin.config_set("maxmemory", 0)  # room again: the probe gets through
            if len(delays) < 6:
                full_after_probe.set()
            return delays[-1]

        class FullAfterTheFirstCommit(CollectingEvents):
            """Fills Redis up once the first commit's events are out."""

            def publish(self, events: Sequence[dict[str, Any]]) -> None:
                if not self.events:
                    admin.config_set("maxmemory", 1)
                super().publish(events)

        threading.Thread(target=fill_up_after_the_probe, daemon=True).start()
        assert watching.wait(10)
        monkeypatch.setattr(outage.Backoff, "delay", recorded)
        settings = load_settings(
            None,
            {"redis": {"url": server.url}, "namespace": "flap", "batch": {"max_docs": 200}},
        )  # fmt: skip
        sink = FullAfterTheFirstCommit()
        code, _, pipeline = run_file(settings, str(path), events_sink=sink)
        assert code == 0
        assert delays == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]  # one wait per outage, growing
        errors = admin.info("errorstats")
        assert errors["errorstat_OOM"]["count"] == 6, errors  # each one a refused write
        info = redis_state(server.url, "flap")
        assert info["docs"] == 2_000 and info["mass"] == pytest.approx(2_000)
        assert pipeline.state.counters["docs"] == 2_000
