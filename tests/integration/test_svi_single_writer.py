"""svi keeps one writer per namespace (its global step does not commute): the writer
lease in Redis, against a real Redis-protocol server, and the file runs that take it."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from cli_runner import NOVELD, noveld, redis_state
from servers.ports import unique_name

from noveld.state.redis.store import RedisStore
from noveld.synth import SynthConfig, write_jsonl

pytestmark = [pytest.mark.integration]


def lease_key(ns: str) -> str:
    return f"noveld:{{{ns}}}:lease"


def committed_docs(client: redis.Redis, ns: str) -> int:
    return int(client.hget(f"noveld:{{{ns}}}:counters", "docs") or 0)


def test_the_lease_has_one_holder_until_it_is_dropped_or_lapses(redis_url: str) -> None:
    ns = unique_name("lease")
    client = redis.Redis.from_url(redis_url)
    a, b = RedisStore(client, ns), RedisStore(client, ns)
    a.lease_ms = b.lease_ms = 1000
    assert a.take_lease() is None  # taken
    assert b.take_lease() == a.writer  # held: b is told by whom
    assert a.take_lease() is None  # renewed by its holder
    b.drop_lease()  # not b's to drop
    assert client.get(lease_key(ns)) == a.writer.encode()
    a.drop_lease()
    assert b.take_lease() is None  # handed over at once
    time.sleep(1.3)  # b stops renewing: its lease lapses
    assert a.take_lease() is None


@pytest.fixture(scope="module")
def stream(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("svi") / "docs.jsonl"
    write_jsonl(SynthConfig(n_docs=1500, n_stories=10, seed=5), path)
    return path


def svi_run(path: Path, redis_url: str, ns: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return noveld(
        "run", "--model", "svi", "--input", str(path), "--redis-url", redis_url,
        "--namespace", ns, *extra,
    )  # fmt: skip


def test_a_second_svi_writer_on_a_namespace_is_refused_and_the_lease_released_at_the_end(
    stream: Path, redis_url: str
) -> None:
    ns = unique_name("lease")
    client = redis.Redis.from_url(redis_url)
    client.set(lease_key(ns), "someoneelse", px=60_000)  # a running svi daemon's lease
    out = svi_run(stream, redis_url, ns)
    assert out.returncode == 2, out.stderr
    assert "writer someoneelse holds the svi writer lease of namespace" in out.stderr
    assert "Traceback" not in out.stderr
    assert committed_docs(client, ns) == 0  # nothing stepped
    client.delete(lease_key(ns))
    out = svi_run(stream, redis_url, ns)
    assert out.returncode == 0, out.stderr
    assert redis_state(redis_url, ns)["docs"] == 1500
    assert client.get(lease_key(ns)) is None  # given up: a standby need not wait it out
    # a dpmm namespace has no single writer: no lease is taken
    ns2 = unique_name("nolease")
    out = noveld("run", "--input", str(stream), "--redis-url", redis_url, "--namespace", ns2)
    assert out.returncode == 0, out.stderr
    assert client.get(lease_key(ns2)) is None


def svi_stdin_run_meets(
    redis_url: str, ns: str, lines: list[str], first: int, meanwhile: Callable[[], None]
) -> tuple[int, str]:
    """An svi stdin run (a long lease term: its thread would renew after 200 s) given
    ``first`` lines; once they are committed, ``meanwhile()``, then the rest of ``lines``.
    Returns its exit code and stderr."""
    client = redis.Redis.from_url(redis_url)
    proc = subprocess.Popen(
        [*NOVELD, "run", "--model", "svi", "--input", "-", "--redis-url", redis_url,
         "--namespace", ns, "--batch-size", "100", "--redis-writer-lease-ms", "600000"],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stderr is not None
    try:
        proc.stdin.writelines(lines[:first])
        proc.stdin.flush()
        deadline = time.monotonic() + 60
        while committed_docs(client, ns) < first:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1]
            time.sleep(0.1)
        meanwhile()
        proc.stdin.writelines(lines[first:])
        proc.stdin.close()
        err = proc.stderr.read()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
    return proc.returncode, err


def test_a_commit_while_another_writer_holds_the_lease_is_refused(
    tmp_path: Path, redis_url: str
) -> None:
    """The lease is checked in the commit script itself, not only by the renewal thread: a
    writer whose lease was taken over steps the model no further."""
    ns = unique_name("lease")
    client = redis.Redis.from_url(redis_url)
    docs = tmp_path / "docs.jsonl"
    write_jsonl(SynthConfig(n_docs=600, n_stories=5, seed=2), docs)
    holders = []

    def taken_over() -> None:
        holders.append(client.get(lease_key(ns)))
        assert holders[0] is not None and client.pttl(lease_key(ns)) > 500_000
        client.set(lease_key(ns), "successor", px=600_000)  # it lapsed and was taken over

    lines = docs.read_text().splitlines(keepends=True)
    code, err = svi_stdin_run_meets(redis_url, ns, lines, 300, taken_over)
    assert code == 4, err
    assert "the writer lease is held by writer successor" in err
    assert "Traceback" not in err
    assert committed_docs(client, ns) == 300  # nothing after the takeover
    assert client.get(lease_key(ns)) == b"successor"  # the successor's lease left alone
    log = client.xrange(f"noveld:{{{ns}}}:log")
    assert {fields[b"w"] for _, fields in log} == set(holders)


def test_a_writer_whose_lease_lapsed_while_another_stepped_the_model_must_reload(
    tmp_path: Path, stream: Path, redis_url: str
) -> None:
    """A lease that lapsed, was taken by another run that stepped the model and gave it up,
    is free again: the first writer's next step would be computed on an old model. The commit
    script refuses it (the log moved since its last commit), and a file run stops (exit 4)."""
    ns = unique_name("lease")
    client = redis.Redis.from_url(redis_url)
    own = tmp_path / "own.jsonl"
    write_jsonl(SynthConfig(n_docs=400, n_stories=5, seed=9), own)

    def another_writer_stepped() -> None:
        client.delete(lease_key(ns))  # it lapsed (the run was paused, say)
        other = svi_run(stream, redis_url, ns)  # another writer takes it, steps, gives it up
        assert other.returncode == 0, other.stderr
        assert committed_docs(client, ns) == 1700

    lines = own.read_text().splitlines(keepends=True)
    code, err = svi_stdin_run_meets(redis_url, ns, lines, 200, another_writer_stepped)
    assert code == 4, err
    assert "the writer lease lapsed and another writer stepped the model meanwhile" in err
    assert "Traceback" not in err
    assert committed_docs(client, ns) == 1700  # its step on the old model was not applied
