"""`redis.replicas_to_ack` against a real primary and its real replica: a commit's events are
published only once the replica has the commit, so a failover (which promotes a replica that
may lack the primary's last writes) can never take back a commit whose events went out."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from cli_runner import NOVELD
from doubles import NoDlq
from servers.redis_cluster import RedisClusterServers
from servers.redis_server import RedisServer, start_replica

from noveld.daemon.pipeline import Pipeline
from noveld.daemon.settings import load_settings
from noveld.daemon.sinks import CollectingEvents
from noveld.state.base import CommitOutcome, CommitRequest
from noveld.state.redis import server as redis_server
from noveld.state.redis.connect import connect
from noveld.state.redis.store import RedisStore
from noveld.synth import SynthConfig, write_jsonl

pytestmark = pytest.mark.integration


@pytest.fixture
def primary_and_replica() -> Iterator[tuple[RedisServer, RedisServer]]:
    with RedisServer() as primary:
        replica = start_replica(primary)
        try:
            yield primary, replica
        finally:
            replica.stop()


def wait_calls(client: redis.Redis) -> int:
    """How many WAIT commands the server has answered."""
    stats = client.info("commandstats").get("cmdstat_wait")
    return int(stats["calls"]) if stats else 0


def commit_one(store: RedisStore, offset: int) -> None:
    settings = load_settings(None, {"namespace": "r"})
    state = Pipeline(settings, store, CollectingEvents(), NoDlq()).state
    store.claim(["f:0"])
    req = CommitRequest({"f:0": offset}, {"f:0": offset + 1}, None, [], {"docs": 1})
    assert store.commit(state, req).outcome is CommitOutcome.COMMITTED


def test_replicated_waits_for_the_replica_and_holds_while_it_is_stopped(
    primary_and_replica: tuple[RedisServer, RedisServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    primary, replica = primary_and_replica
    client = primary.client()
    store = RedisStore(client, "r", replicas_to_ack=1, replica_ack_timeout_ms=100)
    commit_one(store, 0)
    assert store.replicated()
    assert replica.client().hget("noveld:{r}:offsets", "f:0") == b"1"  # it really is there

    replica.kill(signal.SIGSTOP)  # alive but silent: acknowledges nothing
    try:
        commit_one(store, 1)
        before = wait_calls(client)
        assert not store.replicated()  # the WAIT came back short
        assert wait_calls(client) == before + 1
        assert not store.replicated()  # held without asking again (no WAIT per batch)
        assert wait_calls(client) == before + 1
    finally:
        replica.kill(signal.SIGCONT)
    monkeypatch.setattr(redis_server, "REPLICA_HOLD_S", 0.0)
    store._hold_until = 0.0
    assert store.replicated()  # caught up: the commit made while it was stopped is there now
    assert replica.client().hget("noveld:{r}:offsets", "f:0") == b"2"

    assert not RedisStore(client, "r", replicas_to_ack=2, replica_ack_timeout_ms=50).replicated()
    calls = wait_calls(client)
    assert RedisStore(client, "r").replicated()  # 0 replicas to wait for: no WAIT at all
    assert wait_calls(client) == calls


def run(
    stream: Path, url: str, ns: str, dlq: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *NOVELD, "run", "--input", str(stream), "--redis-url", url, "--namespace", ns,
            "--dlq", str(dlq), "--seed", "3", *extra,
        ],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def births(stdout: str) -> list[dict[str, object]]:
    return [e for e in map(json.loads, stdout.splitlines()) if e["type"] == "cluster.born"]


def test_events_wait_in_the_outbox_until_the_replica_has_their_commit(
    primary_and_replica: tuple[RedisServer, RedisServer], tmp_path: Path
) -> None:
    """`noveld run --redis-replicas-to-ack 1` with the replica stopped: every batch commits, no
    event is published; they are in the outbox. Once the replica is back, the next start
    publishes them: the same events as a run that did not wait."""
    primary, replica = primary_and_replica
    stream = tmp_path / "s.jsonl"
    write_jsonl(SynthConfig(n_docs=2000, n_stories=12, seed=4), stream)
    dlq = tmp_path / "dlq.jsonl"
    reference = run(stream, primary.url, "plain", dlq)
    assert reference.returncode == 0, reference.stderr
    assert len(births(reference.stdout)) >= 5

    replica.kill(signal.SIGSTOP)
    try:
        held = run(stream, primary.url, "acked", dlq, "--redis-replicas-to-ack", "1")
    finally:
        replica.kill(signal.SIGCONT)
    assert held.returncode == 0, held.stderr
    assert births(held.stdout) == []
    assert "holding" in held.stderr and "replicas have not acknowledged" in held.stderr
    shown = subprocess.run(
        [*NOVELD, "state", "show", "--redis-url", primary.url, "--namespace", "acked", "--json"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    info = json.loads(shown.stdout)
    assert info["docs"] == 2000 and info["outbox_pending"] >= len(births(reference.stdout))

    released = run(stream, primary.url, "acked", dlq, "--redis-replicas-to-ack", "1")
    assert released.returncode == 0, released.stderr
    strip = [{k: v for k, v in e.items() if k != "namespace"} for e in births(released.stdout)]
    want = [{k: v for k, v in e.items() if k != "namespace"} for e in births(reference.stdout)]
    assert [e["cluster_id"] for e in strip] == [e["cluster_id"] for e in want]
    assert strip == [{**e, "event_id": s["event_id"]} for e, s in zip(want, strip, strict=True)]


def test_replicated_follows_a_failover_it_was_not_told_about(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A graceful failover (``CLUSTER FAILOVER`` on the replica) leaves no connection error
    behind, only a stale slot map: the marker write is redirected (MOVED), the store re-reads
    the map and holds the events for now, and the next check asks the new primary, whose
    replica is the old one."""
    monkeypatch.setattr(redis_server, "REPLICA_HOLD_S", 0.0)
    with RedisClusterServers(3, replicas=1) as cluster:
        store = RedisStore(connect(cluster.url), "gf", replicas_to_ack=1)
        commit_one(store, 0)
        assert store.replicated()
        home = cluster.node_of("noveld:{gf}:meta")
        (replica,) = cluster.replicas_of(home)
        replica.client().execute_command("CLUSTER", "FAILOVER")
        # a manual failover that cannot finish in time (a loaded machine) is aborted by the
        # server without a word: ask again every 15 s
        start = time.monotonic()
        asked = start
        while home.client().info("replication")["role"] != "slave":
            now = time.monotonic()
            assert now < start + 120, "the failover did not happen"
            if now > asked + 15:
                replica.client().execute_command("CLUSTER", "FAILOVER")
                asked = now
            time.sleep(0.1)
        assert not store.replicated()  # redirected: held, and the slot map re-read
        assert store.replicated()  # no commit in between (an idle daemon): the new primary
        commit_one(store, 1)  # the cluster client follows the redirect itself
        assert store.replicated()
        old_primary = home.client(single_connection_client=True)
        old_primary.execute_command("READONLY")  # a replica serves reads only when asked so
        assert old_primary.hget("noveld:{gf}:offsets", "f:0") == b"2"  # WAIT meant it


def test_a_file_run_says_which_events_wait_for_missing_replicas(tmp_path: Path) -> None:
    """With --redis-replicas-to-ack above the replicas there are, a file run ended "done" with
    every event still in the outbox and nothing said at the end."""
    data = tmp_path / "in.jsonl"
    write_jsonl(SynthConfig(n_docs=400, n_stories=5, seed=2), data)
    with RedisServer() as server:  # no replica at all
        out = subprocess.run(
            [*NOVELD, "run", "--input", str(data), "--redis-url", server.url, "--namespace",
             "held", "--redis-replicas-to-ack", "1", "--dlq", str(tmp_path / "d.jsonl")],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout == ""  # nothing delivered
    assert "events are not delivered yet (held for Redis replicas" in out.stderr, out.stderr
