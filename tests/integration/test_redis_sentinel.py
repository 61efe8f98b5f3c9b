"""Redis with Sentinel (``redis+sentinel://``), against a real primary, its replica and real
sentinels: the daemon finds the primary through the sentinels (any of them that answers),
with the data nodes' and the sentinels' own passwords; a wrong service or password is a clear
error, never a traceback. The failover itself is a fault test
(``tests/faults/test_redis_failover_to_lagging_replica.py``, case ``sentinel``)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from cli_runner import noveld, redis_state
from servers.ports import unique_name
from servers.sentinel import RedisSentinelGroup

from noveld.state.redis.connect import connect
from noveld.synth import SynthConfig, write_jsonl

pytestmark = pytest.mark.integration
N = 600


@pytest.fixture(scope="module")
def stream(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sentinel") / "docs.jsonl"
    write_jsonl(SynthConfig(n_docs=N, n_stories=8, seed=5), path)
    return path


def test_run_finds_the_primary_through_any_sentinel_that_answers(stream: Path) -> None:
    ns = unique_name("sent")
    with RedisSentinelGroup(replicas=1, sentinels=3) as group:
        group.sentinels[0].kill(signal.SIGKILL)  # the first address in the URL is dead
        out = noveld("run", "--input", str(stream), "--redis-url", group.url, "--namespace", ns)
        assert out.returncode == 0, out.stderr
        assert "cluster.born" in out.stdout
        info = redis_state(group.url, ns)
        # the commits are on the primary the sentinels name, and its replica has them
        on_primary = group.primary.client().hget(f"noveld:{{{ns}}}:counters", "docs")
        replica = group.replicas[0].client()
        deadline = time.monotonic() + 10
        while replica.hget(f"noveld:{{{ns}}}:counters", "docs") != on_primary:
            assert time.monotonic() < deadline, "the replica never caught up"
            time.sleep(0.05)
    assert info["docs"] == N
    assert int(on_primary or 0) == N


def test_passwords_of_the_data_nodes_and_of_the_sentinels(stream: Path) -> None:
    ns = unique_name("sent-auth")
    with RedisSentinelGroup(
        replicas=0, sentinels=1, password="data-pw", sentinel_password="sent-pw"
    ) as group:
        hosts = group.url.split("://", 1)[1]
        good = f"redis+sentinel://:data-pw@{hosts}?sentinel_password=sent-pw"
        no_sentinel_pw = f"redis+sentinel://:data-pw@{hosts}"
        wrong_data_pw = f"redis+sentinel://:wrong@{hosts}?sentinel_password=sent-pw"
        ok = noveld("run", "--input", str(stream), "--redis-url", good, "--namespace", ns)
        refused = [
            noveld("run", "--input", str(stream), "--redis-url", url, "--namespace", ns)
            for url in (no_sentinel_pw, wrong_data_pw)
        ]
        docs = redis_state(good, ns)["docs"]
    assert ok.returncode == 0, ok.stderr
    assert docs == N
    for out in refused:
        assert out.returncode == 2, out.stderr
        assert "cannot reach Redis (redis+sentinel://127.0.0.1:" in out.stderr
        assert "Traceback" not in out.stderr
        assert "pw" not in out.stderr  # no password in the message
    assert "answered with a primary for service 'noveld'" in refused[0].stderr
    assert "auth" in refused[0].stderr.lower()  # the sentinel's own reply says why
    assert "password" in refused[1].stderr.lower()


def test_connections_to_the_primary_carry_the_reply_timeout() -> None:
    """A hung primary must not block the daemon: its connections time out (and the sentinels'
    too, so a hung sentinel is skipped)."""
    with RedisSentinelGroup(replicas=0, sentinels=1) as group:
        client = connect(group.url, timeout_s=2.0, socket_timeout_s=3.0)
        assert client.ping()
        kwargs = client.connection_pool.connection_kwargs
        sentinel_kwargs = client.connection_pool.sentinel_manager.sentinel_kwargs
        client.close()
    assert kwargs["socket_timeout"] == 3.0
    assert sentinel_kwargs["socket_timeout"] == 2.0


def test_an_unknown_service_or_a_bad_url_is_a_clear_error(stream: Path) -> None:
    with RedisSentinelGroup(replicas=0, sentinels=1) as group:
        wrong = group.url.replace("/noveld/", "/no-such-service/")
        out = noveld("run", "--input", str(stream), "--redis-url", wrong)
    assert out.returncode == 2
    assert "answered with a primary for service 'no-such-service'" in out.stderr
    assert "answers, but does not name a primary for it" in out.stderr
    assert "Traceback" not in out.stderr
    bad = noveld("run", "--input", str(stream), "--redis-url", "redis+sentinel://h:1,h:x/svc")
    assert bad.returncode == 2
    assert "bad sentinel port in 'h:x'" in bad.stderr
    assert "Traceback" not in bad.stderr
