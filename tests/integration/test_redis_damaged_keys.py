"""A namespace whose keys hold what noveld never writes there — a key of another Redis type, a
count that is not a number, JSON of the wrong shape, an undecodable checkpoint or log entry —
is named at start-up: ``noveld state show`` and ``noveld run`` exit 6 ("the namespace's state
in Redis is gone or damaged", docs/operations.md) with the key and what is wrong, never a
traceback, a bare ``int()`` error with exit 2, or "Redis unreachable"."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis
from cli_runner import noveld
from servers.redis_server import RedisServer

from noveld.daemon.settings import load_settings, model_fingerprint
from noveld.models.base import StatsDelta
from noveld.state.codec import decode_checkpoint_arrays, encode_delta
from noveld.state.redis.keys import CHECKPOINT_EVERY
from noveld.state.redis.store import RedisStore
from noveld.synth import SynthConfig, write_jsonl

pytestmark = pytest.mark.integration

#: a change to a namespace's keys (given the client and the input path)
Damage = Callable[[redis.Redis, Path], object]

NS = "dmg"
P = f"noveld:{{{NS}}}:"
N_DOCS = 500
BATCH = 2  # N_DOCS / BATCH commits: past CHECKPOINT_EVERY, so the namespace has a checkpoint


@pytest.fixture(scope="module")
def stream(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "s.jsonl"
    write_jsonl(SynthConfig(n_docs=N_DOCS, n_stories=5, seed=3), path)
    return path


@pytest.fixture(scope="module")
def healthy(
    _shared_redis: RedisServer, stream: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[bytes, bytes]:
    """The keys (DUMP) of a namespace written by ``noveld run``: checkpoint, log, outbox…"""
    client = redis.Redis.from_url(_shared_redis.url)
    client.flushall()
    dlq = tmp_path_factory.mktemp("dlq") / "d.jsonl"
    target = ["--redis-url", _shared_redis.url, "--namespace", NS]
    out = noveld("run", "--input", str(stream), *target, "--batch-size", str(BATCH), "--quiet",
                 "--dlq", str(dlq))  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert N_DOCS // BATCH > CHECKPOINT_EVERY and client.exists(P + "ckpt")
    dumps = {k: client.dump(k) for k in client.keys(P + "*")}
    client.flushall()
    return dumps


@pytest.fixture
def client(redis_url: str, healthy: dict[bytes, bytes]) -> redis.Redis:
    """The emptied server holding a copy of the healthy namespace."""
    c = redis.Redis.from_url(redis_url)
    for key, dump in healthy.items():
        c.restore(key, 0, dump)
    return c


def retyped(name: str, write: Callable[[redis.Redis, str], object]) -> Damage:
    """A damage that puts a key of another Redis type in place of key ``name``."""

    def damage(c: redis.Redis, _: Path) -> object:
        c.delete(P + name)
        return write(c, P + name)

    return damage


def log_entry(fields: dict[str, str | bytes]) -> Damage:
    """A damage that appends an entry to the log (and counts it in meta)."""

    def damage(c: redis.Redis, _: Path) -> object:
        seq = int(c.hget(P + "meta", "seq") or 0) + 1
        c.xadd(P + "log", fields, id=f"{seq}-1")  # type: ignore[arg-type]
        return c.hset(P + "meta", "seq", seq)

    return damage


def cut_checkpoint(c: redis.Redis, _: Path) -> object:
    blob = c.get(P + "ckpt")
    assert blob is not None
    return c.set(P + "ckpt", blob[: len(blob) // 2])


def rewritten_checkpoint(change: Callable[[dict[str, np.ndarray]], None]) -> Damage:
    """A damage that rewrites the checkpoint as a well-formed one whose arrays ``change``
    spoils: what only the statistics checks catch (the kernels do not bounds-check)."""

    def damage(c: redis.Redis, _: Path) -> object:
        blob = c.get(P + "ckpt")
        assert blob is not None
        arrays, header = decode_checkpoint_arrays(blob)
        change(arrays)
        buf = io.BytesIO()
        np.savez(buf, header=np.frombuffer(json.dumps(header).encode(), np.uint8), **arrays)
        return c.set(P + "ckpt", buf.getvalue())

    return damage


def spoiled_delta(**fields: Any) -> bytes:
    """A decodable delta of one cluster and one word, with ``fields`` replaced."""
    one = np.ones(1)
    parts: dict[str, Any] = {
        "decay": 1.0, "cluster_uids": np.array([1]), "dm": one, "dntok": 2 * one,
        "word_cluster": np.array([0]), "word_ids": np.array([0]), "word_count": 2 * one,
        "born_uids": np.zeros(0, np.int64), "retired_uids": np.zeros(0, np.int64),
    }  # fmt: skip
    return encode_delta(StatsDelta(**(parts | fields)))


def _loop(a: dict[str, np.ndarray]) -> None:
    a["nxt"][1] = 0  # entry 0 → 1 → 0 …: two links into entry 0, and a walk without end


# (damage, what the message says besides the namespace)
DAMAGES: dict[str, tuple[Damage, str]] = {
    "fingerprint-not-json": (
        lambda c, _: c.hset(P + "meta", "fingerprint", "{nope"),
        "key meta field 'fingerprint' is not JSON",
    ),
    "fingerprint-list": (
        lambda c, _: c.hset(P + "meta", "fingerprint", "[1, 2]"),
        "key meta field 'fingerprint' is a JSON list, not an object",
    ),
    "schema-x": (
        lambda c, _: c.hset(P + "meta", "schema", "x"),
        "key meta field 'schema' is not a non-negative integer ('x')",
    ),
    "seq-x": (
        lambda c, _: c.hset(P + "meta", "seq", "x"),
        "key meta field 'seq' is not a non-negative integer ('x')",
    ),
    "offset-x": (
        lambda c, s: c.hset(P + "offsets", f"{s}:0", "x"),
        "key offsets field '{stream}:0' is not a non-negative integer ('x')",
    ),
    "offset-negative": (
        lambda c, s: c.hset(P + "offsets", f"{s}:0", "-7"),
        "key offsets field '{stream}:0' is not a non-negative integer ('-7')",
    ),
    "counter-x": (
        lambda c, _: c.hset(P + "counters", "docs", "x"),
        "key counters field 'docs' is not a non-negative integer ('x')",
    ),
    "uidnext-x": (
        lambda c, _: c.hset(P + "uidnext", "0", "x"),
        "key uidnext field '0' is not a non-negative integer ('x')",
    ),
    "uidnext-slot-x": (
        lambda c, _: c.hset(P + "uidnext", "x", "3"),
        "key uidnext has a field 'x' that is not a uid slot",
    ),
    "epoch-x": (
        lambda c, s: c.hset(P + "epochs", f"{s}:0", "x"),
        "key epochs field '{stream}:0' is not a non-negative integer ('x')",
    ),
    "novelty-not-json": (lambda c, _: c.set(P + "novelty", "{nope"), "key novelty is not JSON"),
    "novelty-list": (
        lambda c, _: c.set(P + "novelty", "[1]"),
        "key novelty is a JSON list, not an object",
    ),
    "novelty-candidates-number": (
        lambda c, _: c.set(P + "novelty", '{"candidates": 5}'),
        "key novelty entry candidates is a JSON number, not a list",
    ),
    "novelty-candidate-incomplete": (
        lambda c, _: c.set(P + "novelty", '{"candidates": [{"uid": 1}]}'),
        "key novelty entry candidates[0] lacks 'born_at'",
    ),
    "log-entry-garbage": (log_entry({"w": "x", "d": "garbage"}), "is not a noveld delta"),
    "log-entry-without-delta": (log_entry({"w": "x"}), "has no field 'd'"),
    "ckpt-garbage": (
        lambda c, _: c.set(P + "ckpt", "garbage"),
        "key ckpt is not a noveld checkpoint (not an .npz archive)",
    ),
    "ckpt-cut": (cut_checkpoint, "key ckpt is not a noveld checkpoint"),
    "ckpt-postings-loop": (
        rewritten_checkpoint(_loop),
        "key ckpt is damaged: stats.nxt links entry 0 from two places",
    ),
    "ckpt-slot-out-of-range": (
        rewritten_checkpoint(lambda a: a["pk"].__setitem__(0, 10**6)),
        "key ckpt is damaged: stats.pk names slot 1000000 (entry 0), outside the",
    ),
    "ckpt-nan-mass": (
        rewritten_checkpoint(lambda a: a["m"].__setitem__(0, np.nan)),
        "key ckpt is damaged: stats.m holds nan (slot 0), not a finite number",
    ),
    "log-entry-word-beyond-vocab": (
        log_entry({"w": "x", "d": spoiled_delta(word_ids=np.array([10**6]))}),
        "counts word ids up to 1000000 (log entry ",
    ),
    "log-entry-pair-of-no-cluster": (
        log_entry({"w": "x", "d": spoiled_delta(word_cluster=np.array([3]))}),
        "'s word_cluster names cluster 3 of 1 (pair 0)",
    ),
    "log-entry-negative-word": (
        log_entry({"w": "x", "d": spoiled_delta(word_ids=np.array([-5]))}),
        "'s word_ids holds word -5, not a word id of ",
    ),
    "log-entry-decay-above-one": (
        log_entry({"w": "x", "d": spoiled_delta(decay=1.5)}),
        "'s decay is 1.5, not in [0, 1]",
    ),
    "vocab-word-not-utf8": (
        lambda c, _: c.rpush(P + "vocab", b"\xff\xfe"),
        "key vocab has a word at index",
    ),
    "vocab-a-string": (
        retyped("vocab", lambda c, k: c.set(k, "x")),
        "key vocab is a Redis string, not a list",
    ),
    "meta-a-string": (
        retyped("meta", lambda c, k: c.set(k, "x")),
        "key meta is a Redis string, not a hash",
    ),
    "offsets-a-list": (
        retyped("offsets", lambda c, k: c.rpush(k, "x")),
        "key offsets is a Redis list, not a hash",
    ),
    "novelty-a-hash": (
        retyped("novelty", lambda c, k: c.hset(k, "a", "x")),
        "key novelty is a Redis hash, not a string",
    ),
    "ckpt-a-list": (
        retyped("ckpt", lambda c, k: c.rpush(k, "x")),
        "key ckpt is a Redis list, not a string",
    ),
    "outbox-a-string": (
        retyped("outbox", lambda c, k: c.set(k, "x")),
        "key outbox is a Redis string, not a stream",
    ),
    "outbox-event-garbage": (
        lambda c, _: c.xadd(P + "outbox", {"0": "nope"}),
        "holds an event that is not one ('nope')",
    ),
}


def commands(url: str, stream: Path, tmp_path: Path) -> list[list[str]]:
    target = ["--redis-url", url, "--namespace", NS]
    return [
        ["state", "show", *target],
        ["run", "--input", str(stream), *target, "--quiet", "--dlq", str(tmp_path / "d.jsonl")],
    ]


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_key_is_named_with_exit_6(
    client: redis.Redis, redis_url: str, stream: Path, tmp_path: Path, damage: str
) -> None:
    do, said = DAMAGES[damage]
    do(client, stream)
    said = said.format(stream=stream)
    for cmd in commands(redis_url, stream, tmp_path):
        proc = noveld(*cmd, timeout=120)
        assert proc.returncode == 6, (cmd[0], proc.stderr)
        err = proc.stderr
        assert "gone or damaged" in err and f"namespace '{NS}'" in err, err
        assert said in err, err
        assert "Traceback" not in err and "allow_pickle" not in err, err
        assert "unreachable" not in err and "WRONGTYPE" not in err, err


def test_a_healthy_namespace_still_loads(
    client: redis.Redis, redis_url: str, stream: Path, tmp_path: Path
) -> None:
    show, run = commands(redis_url, stream, tmp_path)
    shown = noveld(*show, "--json", timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert f'"docs": {N_DOCS}' in shown.stdout
    again = noveld(*run, timeout=120)
    assert again.returncode == 0, again.stderr
    assert "Traceback" not in again.stderr  # resumed at the end: nothing read again
    settings = load_settings(None, {"namespace": NS, "model": {}})
    state = RedisStore(client, NS).load(model_fingerprint(settings))
    assert state is not None and state.counters["docs"] == N_DOCS
    assert state.offsets == {f"{stream}:0": N_DOCS}


def test_an_svi_namespace_whose_first_step_forgot_everything_loads(
    redis_url: str, stream: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """svi with τ₀ = 0 takes ρ = 1 at its first step: a decay of 0 in the log, which the log
    entry check must take for what it is, not damage."""
    monkeypatch.setenv("NOVELD_MODEL__TAU0", "0")
    target = ["--redis-url", redis_url, "--namespace", "svi0", "--model", "svi", "--quiet"]
    for _ in range(2):
        out = noveld("run", "--input", str(stream), *target, "--dlq", str(tmp_path / "d.jsonl"),
                     timeout=120)  # fmt: skip
        assert out.returncode == 0, out.stderr
