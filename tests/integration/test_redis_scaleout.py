"""The Redis delta log: checkpoints bound it, a reload equals the writer, and replicas sharing a
namespace (scale-out) keep disjoint cluster uids, one vocabulary and converge."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import redis
from doubles import NoDlq
from helpers.redis_commits import recorded_commits

from noveld.connectors.jsonl import Record
from noveld.daemon.pipeline import Pipeline
from noveld.daemon.settings import Settings, load_settings, model_fingerprint
from noveld.daemon.sinks import CollectingEvents
from noveld.schema import SourcePosition
from noveld.state.base import state_digest
from noveld.state.redis.keys import UID_SLOT_BITS
from noveld.state.redis.store import RedisStore
from noveld.synth import SynthConfig, generate

pytestmark = pytest.mark.integration


def settings_for(tmp_path: Path, ns: str, hold_docs: int = 0, refresh: bool = True) -> Settings:
    return load_settings(
        None,
        {
            "namespace": ns,
            "dlq": str(tmp_path / "dlq.jsonl"),
            "model": {"deterministic": True},
            "novelty": {"hold_docs": hold_docs},
            "batch": {"refresh": refresh},
        },
    )


def records(n: int, seed: int, topic: str, partition: int) -> list[Record]:
    docs = generate(SynthConfig(n_docs=n, n_stories=12, seed=seed))
    return [
        Record(
            json.dumps({"id": f"{topic}-{partition}-{i}", "text": d["text"]}).encode(),
            SourcePosition(topic=topic, partition=partition, offset=i),
        )
        for i, d in enumerate(docs)
    ]


def feed(pipe: Pipeline, recs: list[Record], batch: int = 100) -> None:
    for i in range(0, len(recs), batch):
        chunk = recs[i : i + batch]
        key = f"{chunk[0].position.topic}:{chunk[0].position.partition}"
        pipe.step(chunk, {key: chunk[0].position.offset}, {key: chunk[-1].position.offset + 1})


def replica(client: redis.Redis, settings: Settings, keys: list[str], **kw: int) -> Pipeline:
    store = RedisStore(client, settings.namespace, **kw)
    pipe = Pipeline(settings, store, CollectingEvents(), NoDlq())
    store.claim(keys)
    return pipe


def test_checkpoints_bound_the_log_and_a_reload_equals_the_writer(
    redis_url: str, tmp_path: Path
) -> None:
    client = redis.Redis.from_url(redis_url)
    settings = settings_for(tmp_path, "ck")
    pipe = replica(client, settings, ["in:0"], checkpoint_every=4)
    feed(pipe, records(2500, 1, "in", 0))  # 25 commits
    store = pipe.store
    assert isinstance(store, RedisStore)
    assert store.last_seq == 25
    assert 0 < store.log_length() <= 8  # entries after the checkpoint before last
    reloaded = RedisStore(client, "ck").load(model_fingerprint(settings))
    assert reloaded is not None
    pipe._sync_state()
    assert state_digest(reloaded) == state_digest(pipe.state)
    assert reloaded.counters["docs"] == 2500


def test_two_replicas_share_one_namespace(redis_url: str, tmp_path: Path) -> None:
    """Interleaved commits from two partitions: uids never collide, the vocabulary is one
    shared id space, and both replicas end with the statistics a fresh load sees."""
    client = redis.Redis.from_url(redis_url)
    settings = settings_for(tmp_path, "two")
    a = replica(client, settings, ["in:0"])
    b = replica(client, settings, ["in:1"])
    ra, rb = records(1200, 2, "in", 0), records(1200, 3, "in", 1)
    for i in range(0, 1200, 100):
        feed(a, ra[i : i + 100])
        feed(b, rb[i : i + 100])
    a.step([], {}, {})  # an empty step takes in b's last batch
    ua = {int(u) for u in a.state.stats.uid[a.state.stats.active_slots()]}
    slots = {u >> UID_SLOT_BITS for u in ua}
    assert slots == {0, 1}  # a holds its own clusters (slot 0) and b's (slot 1)
    assert a.vocab.to_list() == b.vocab.to_list()[: len(a.vocab)]
    loaded = RedisStore(client, "two").load(model_fingerprint(settings))
    assert loaded is not None
    assert loaded.counters["docs"] == 2400
    assert loaded.vocab == a.vocab.to_list()
    a._sync_state()
    # a tracks only its own partition's offsets; the statistics and vocabulary must agree
    assert state_digest(loaded) == state_digest(replace(a.state, offsets=loaded.offsets))
    assert sum(loaded.stats.mass(loaded.stats.active_slots())) == pytest.approx(2400)


def test_a_lagging_replica_reloads_when_the_log_was_trimmed(redis_url: str, tmp_path: Path) -> None:
    client = redis.Redis.from_url(redis_url)
    settings = settings_for(tmp_path, "lag")
    a = replica(client, settings, ["in:0"], checkpoint_every=2)
    b = replica(client, settings, ["in:1"], checkpoint_every=2)
    feed(b, records(100, 5, "in", 1))
    feed(a, records(1000, 4, "in", 0))  # 10 commits, checkpoints trim what b has not read
    feed(b, records(200, 5, "in", 1)[100:])
    assert isinstance(b.store, RedisStore) and b.store.reloads == 1
    loaded = RedisStore(client, "lag").load(model_fingerprint(settings))
    assert loaded is not None
    b._sync_state()
    assert state_digest(loaded) == state_digest(replace(b.state, offsets=loaded.offsets))


def test_a_store_rolled_back_by_a_failover_is_reloaded_with_its_uid_counter(
    redis_url: str, tmp_path: Path
) -> None:
    """A failover can promote a replica that lacks the last commits: the store is then *behind*
    the writer, uid counter included. After reloading, the writer re-does the lost batches and
    ends where a writer that never saw the rollback ends (a stale uid counter was refused)."""
    client = redis.Redis.from_url(redis_url)
    recs = records(600, 5, "in", 0)
    settings = settings_for(tmp_path, "fo")
    pipe = replica(client, settings, ["in:0"])
    feed(pipe, recs[:300])
    keys = sorted(client.scan_iter("noveld:{fo}:*"))
    saved = {k: client.dump(k) for k in keys}  # what the replica holds
    feed(pipe, recs[300:450])  # commits the primary takes with it
    assert int(client.hget("noveld:{fo}:offsets", "in:0") or 0) == 450
    for k in client.scan_iter("noveld:{fo}:*"):
        client.delete(k)
    for k, v in saved.items():
        client.restore(k, 0, v, replace=True)  # the promoted replica
    pipe.reload()
    feed(pipe, recs[300:])
    clean = replica(client, settings_for(tmp_path, "fo-clean"), ["in:0"])
    feed(clean, recs)
    assert int(client.hget("noveld:{fo}:offsets", "in:0") or 0) == 600
    assert state_digest(pipe.state) == state_digest(clean.state)
    reloaded = RedisStore(client, "fo").load(model_fingerprint(settings))
    assert reloaded is not None and state_digest(reloaded) == state_digest(clean.state)


def test_claims_a_failover_lost_are_restored_and_other_owners_stay(redis_url: str) -> None:
    """restore_claims(): a store that lost this writer's claim (lower epoch) gets a new one; a
    partition another writer claimed since (higher epoch) stays theirs."""
    client = redis.Redis.from_url(redis_url)
    a, b = RedisStore(client, "rc"), RedisStore(client, "rc")
    a.claim(["in:0", "in:1"])
    assert a.restore_claims() == []  # nothing lost: no new claim
    assert client.hgetall("noveld:{rc}:epochs") == {b"in:0": b"1", b"in:1": b"1"}
    client.hset("noveld:{rc}:epochs", "in:0", 0)  # the promoted replica never saw the claim
    b.claim(["in:1"])  # ...while in:1 really moved to another writer
    assert a.restore_claims() == ["in:0"]
    assert a.epochs["in:0"] == int(client.hget("noveld:{rc}:epochs", "in:0") or 0) == 1
    assert a.epochs["in:1"] < b.epochs["in:1"]  # still fenced on in:1


def story_records(partition: int, first: int, n: int) -> list[Record]:
    """``n`` documents of one story (same words) on ``in:<partition>`` from offset ``first``."""
    text = "volcano eruption ash cloud grounds flights airport closed lava"
    return [
        Record(
            json.dumps({"id": f"s{partition}-{first + i}", "text": text}).encode(),
            SourcePosition(topic="in", partition=partition, offset=first + i),
        )
        for i in range(n)
    ]


def test_a_birth_confirmed_by_two_replicas_is_announced_once(
    redis_url: str, tmp_path: Path
) -> None:
    """Replica b loads the novelty candidates a left in the store, then both see the candidate
    reach min_size in the same round: each confirms it, the commit script lets the first birth
    through and leaves the second out (not in the outbox, not counted). Births are announced
    at once here (hold 0): the commit script is the guard behind the hold as well."""
    client = redis.Redis.from_url(redis_url)
    settings = settings_for(tmp_path, "once", hold_docs=0)
    a = replica(client, settings, ["in:0"])
    feed(a, story_records(0, 0, 2))  # a candidate of 2 documents (min_size 3)
    b = replica(client, settings, ["in:1"])  # starts from a's candidates
    assert isinstance(b.store, RedisStore)
    b_commits = recorded_commits(b.store)
    assert b.tracker.to_json() == a.tracker.to_json()
    feed(a, story_records(0, 2, 1))
    feed(b, story_records(1, 0, 1))
    assert isinstance(a.events, CollectingEvents) and isinstance(b.events, CollectingEvents)
    born = [e for e in a.events.events + b.events.events if e["type"] == "cluster.born"]
    assert len({e["event_id"] for e in born}) == 1
    assert len({json.dumps(e, sort_keys=True) for e in born}) == 1  # one payload, a's
    assert born[0]["confirmed_at"]["partition"] == 0
    loaded = RedisStore(client, "once").load(model_fingerprint(settings))
    assert loaded is not None and loaded.counters["births"] == 1
    assert isinstance(b.store, RedisStore) and list(b_commits[-1].suppressed) == [
        born[0]["event_id"]
    ]
    cid = born[0]["cluster_id"]
    assert client.hget("noveld:{once}:lifecycle", cid) == b"born"


def test_replicas_summaries_add_up_in_the_store(redis_url: str, tmp_path: Path) -> None:
    """Each replica's table holds what it loaded and its own batches; the stored summaries hold
    every batch (a writer takes its own folded entries as they are only while no other writer
    committed since it loaded)."""
    client = redis.Redis.from_url(redis_url)
    settings = settings_for(tmp_path, "sum")
    a = replica(client, settings, ["in:0"])
    alone = records(400, 7, "in", 0)
    feed(a, alone[:200])  # a alone: its entries are taken as they are
    assert isinstance(a.store, RedisStore) and a.store.stories_in_step
    b = replica(client, settings, ["in:1"])  # loads a's summaries; then a commits first
    loaded = {u: s["docs"] for u, s in b.state.stories.to_json().items()}
    assert loaded
    ra, rb = alone[200:], records(400, 7, "in", 1)
    for i in range(0, 200, 100):  # interleaved: each sees the other's commits
        feed(a, ra[i : i + 100])
        feed(b, rb[i : i + 100])
    assert isinstance(b.store, RedisStore)
    assert not a.store.stories_in_step and not b.store.stories_in_step
    stored = RedisStore(client, "sum").read()
    assert stored is not None
    mine, theirs = a.state.stories.to_json(), b.state.stories.to_json()
    both = stored.stories.to_json()
    grew = [{u for u, s in t.items() if s["docs"] > loaded.get(u, 0)} for t in (mine, theirs)]
    assert grew[0] & grew[1]  # stories both replicas added to
    for uid, s in both.items():
        own = [t[uid] for t in (mine, theirs) if uid in t]
        assert s["docs"] == sum(t["docs"] for t in own) - loaded.get(uid, 0), uid
        assert s["born"] == min(t["born"] for t in own)
        assert s["last"] == max(t["last"] for t in own)


def texts_at(partition: int, first: int, texts: list[str], prefix: str) -> list[Record]:
    """Documents ``texts`` on ``in:<partition>`` from offset ``first``."""
    return [
        Record(
            json.dumps({"id": f"{prefix}{partition}-{first + i}", "text": t}).encode(),
            SourcePosition(topic="in", partition=partition, offset=first + i),
        )
        for i, t in enumerate(texts)
    ]


def test_held_births_of_one_story_on_two_replicas_are_announced_once(
    redis_url: str, tmp_path: Path
) -> None:
    """With novelty.hold_docs, two replicas that open and confirm one story in the same round
    hold their births; b merges its twin into a's (the lower uid), and the story is announced
    once, as a's cluster, whichever replica lets its held birth out first."""
    client = redis.Redis.from_url(redis_url)
    # without the pre-seat refresh, b seats the story as if at once with a (a's commit
    # landing while b steps): the twins reconciliation joins
    settings = settings_for(tmp_path, "held", hold_docs=4, refresh=False)
    a = replica(client, settings, ["in:0"])
    b = replica(client, settings, ["in:1"])
    fill = [str(d["text"]) for d in generate(SynthConfig(n_docs=200, n_stories=12, seed=5))]
    at = {0: 0, 1: 0}

    def step(pipe: Pipeline, partition: int, texts: list[str], prefix: str = "f") -> None:
        feed(pipe, texts_at(partition, at[partition], texts, prefix))
        at[partition] += len(texts)

    # both write, and each has seen the other's clusters: other writers are active
    step(a, 0, fill[:20])
    step(b, 1, fill[20:40])
    step(a, 0, fill[40:60])
    volcano = ["volcano eruption ash cloud grounds flights airport closed lava"] * 3
    step(a, 0, volcano, "v")
    step(b, 1, volcano, "v")
    for i in range(4):  # later rounds: the merge lands, the held births come out
        step(a if i % 2 == 0 else b, i % 2, fill[60 + 20 * i : 80 + 20 * i])
    assert isinstance(a.events, CollectingEvents) and isinstance(b.events, CollectingEvents)
    events = a.events.events + b.events.events
    born = [e for e in events if e["type"] == "cluster.born" and e["founding_doc_id"][0] == "v"]
    merged = [e for e in events if e["type"] == "cluster.merged"]
    assert len({e["event_id"] for e in born}) == 1
    (cid,) = {e["cluster_id"] for e in born}
    assert int(cid[1:]) >> UID_SLOT_BITS == 0  # a's cluster: the lower uid
    assert any(e["into"] == cid and int(e["cluster_id"][1:]) >> UID_SLOT_BITS == 1 for e in merged)
