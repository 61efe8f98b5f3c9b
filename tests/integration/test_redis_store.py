"""RedisStore against a real Redis-protocol server started by tests/servers/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis
from doubles import NoDlq
from helpers.redis_commits import rebuilt_after_every_commit, same_digest

from noveld.daemon.embedded import run_file
from noveld.daemon.pipeline import Pipeline
from noveld.daemon.settings import Settings, load_settings, model_fingerprint
from noveld.daemon.sinks import CollectingEvents
from noveld.schema import event_json
from noveld.state.base import (
    CommitOutcome,
    CommitRequest,
    FingerprintMismatch,
    NamespaceState,
    state_digest,
)
from noveld.state.redis.keys import OUTBOX_ENTRY_EVENTS
from noveld.state.redis.store import RedisStore
from noveld.synth import SynthConfig, write_jsonl

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stream(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "s.jsonl"
    write_jsonl(SynthConfig(n_docs=3000, n_stories=15, seed=2), path)
    return path


def settings_for(tmp_path: Path, **model: object) -> Settings:
    return load_settings(
        None, {"namespace": "t", "dlq": str(tmp_path / "dlq.jsonl"), "model": model}
    )


def stats_table(state: NamespaceState) -> dict[int, tuple[float, float, dict[int, float]]]:
    """True statistics by cluster uid (slot layout and postings order removed)."""
    s = state.stats
    out = {}
    for k in s.active_slots().tolist():
        ws, cs = s.word_counts(k)
        out[int(s.uid[k])] = (
            float(s.m[k] * s.scale),
            float(s.ntok[k] * s.scale),
            dict(zip(ws.tolist(), cs.tolist(), strict=True)),
        )
    return out


def assert_close(a: NamespaceState, b: NamespaceState) -> None:
    ta, tb = stats_table(a), stats_table(b)
    assert ta.keys() == tb.keys()
    for uid, (m, n, words) in ta.items():
        assert tb[uid][0] == pytest.approx(m, rel=1e-9)
        assert tb[uid][1] == pytest.approx(n, rel=1e-9)
        assert tb[uid][2].keys() == words.keys()
        for w, c in words.items():
            assert tb[uid][2][w] == pytest.approx(c, rel=1e-9)


@pytest.mark.parametrize(
    ("kind", "half_life"), [("dpmm", 0.0), ("dpmm", 700.0), ("svi", 0.0), ("hdp", 0.0)]
)
def test_redis_and_memory_agree_after_every_commit(
    redis_url: str, stream: Path, tmp_path: Path, kind: str, half_life: float
) -> None:
    """A model rebuilt from Redis (checkpoint + delta log) equals the live one after every
    commit: exactly (same digest) with integer counts and for svi, whose writer applies its own
    step through the replay code; to 1e-9 for dpmm with forgetting, where the log sums a batch's
    counts before scaling and the live model adds them one document at a time."""
    client = redis.Redis.from_url(redis_url)
    settings = settings_for(tmp_path, half_life_docs=half_life, kind=kind)

    def same(loaded: NamespaceState, live: NamespaceState) -> bool:
        if half_life == 0 or kind in ("svi", "hdp"):
            return same_digest(loaded, live)
        assert_close(loaded, live)
        return loaded.offsets == live.offsets

    code, compared, events = rebuilt_after_every_commit(client, settings, stream, same)
    assert code == 0 and len(compared) == 12 and all(compared)
    loaded = RedisStore(client, "t").load(model_fingerprint(settings))
    assert loaded is not None
    assert loaded.counters["docs"] == 3000 and loaded.offsets == {f"{stream}:0": 3000}
    mass = loaded.stats.mass(loaded.stats.active_slots()).sum()
    if kind == "svi":  # expected counts of a recency-weighted average, not document counts
        assert mass > 0
    elif kind == "hdp":  # categories count tables (≥ one per document); topics count none
        assert mass >= 3000
    else:
        assert mass == pytest.approx(3000) if half_life == 0 else 0 < mass < 3000
    assert {e["event_id"] for e in events}  # events delivered …
    assert RedisStore(client, "t").outbox_pending() == []  # … and acknowledged


def test_resume_from_redis_matches_a_clean_run(
    redis_url: str, stream: Path, tmp_path: Path
) -> None:
    """Stop half way, start a new process-equivalent from Redis: same final model."""
    client = redis.Redis.from_url(redis_url)
    settings = settings_for(tmp_path)
    half = tmp_path / "half.jsonl"
    lines = stream.read_text().splitlines(keepends=True)
    half.write_text("".join(lines[: 6 * 256]))
    run_file(
        settings,
        str(half),
        events_sink=CollectingEvents(),
        store=RedisStore(client, "t"),
        snapshot=False,
    )
    half.write_text("".join(lines))
    _, _, _resumed = run_file(
        settings,
        str(half),
        events_sink=CollectingEvents(),
        store=RedisStore(client, "t"),
        snapshot=False,
    )
    clean_settings = load_settings(None, {"namespace": "u", "dlq": str(tmp_path / "d2.jsonl")})
    _, _, _clean = run_file(
        clean_settings,
        str(half),
        events_sink=CollectingEvents(),
        store=RedisStore(client, "u"),
        snapshot=False,
    )
    a = RedisStore(client, "t").load(model_fingerprint(settings))
    b = RedisStore(client, "u").load(model_fingerprint(clean_settings))
    assert a is not None and b is not None
    assert a.counters["docs"] == b.counters["docs"] == len(lines)
    assert state_digest(a) == state_digest(b)


def test_replay_and_fencing(redis_url: str, stream: Path, tmp_path: Path) -> None:
    client = redis.Redis.from_url(redis_url)
    settings = settings_for(tmp_path)
    run_file(
        settings,
        str(stream),
        events_sink=CollectingEvents(),
        store=RedisStore(client, "t"),
        snapshot=False,
    )
    store = RedisStore(client, "t")
    state = store.load(model_fingerprint(settings))
    assert state is not None
    key = f"{stream}:0"
    store.claim([key])
    before = dict(state.counters)
    replay = CommitRequest({key: 2816}, {key: 3000}, None, [], {"docs": 184})
    assert store.commit(state, replay).outcome is CommitOutcome.REPLAY
    assert state.counters == before
    reloaded = RedisStore(client, "t").load(model_fingerprint(settings))
    assert reloaded is not None and reloaded.counters == before  # nothing applied twice

    old_owner, new_owner = RedisStore(client, "t"), RedisStore(client, "t")
    old_owner.claim([key])
    new_owner.claim([key])  # a rebalance moved the partition
    nxt = CommitRequest({key: 3000}, {key: 3001}, None, [], {"docs": 1})
    assert old_owner.commit(state, nxt).outcome is CommitOutcome.FENCED
    assert new_owner.commit(state, nxt).outcome is CommitOutcome.COMMITTED
    assert int(client.hget("noveld:{t}:offsets", key) or 0) == 3001


def test_incompatible_fingerprint_is_refused(redis_url: str, tmp_path: Path) -> None:
    client = redis.Redis.from_url(redis_url)
    RedisStore(client, "t").load(model_fingerprint(settings_for(tmp_path)))
    other = model_fingerprint(settings_for(tmp_path, beta=0.5))
    with pytest.raises(FingerprintMismatch, match="beta"):
        RedisStore(client, "t").load(other)


def test_outbox_keeps_events_until_acknowledged(redis_url: str, tmp_path: Path) -> None:
    client = redis.Redis.from_url(redis_url)
    settings = settings_for(tmp_path)
    store = RedisStore(client, "t")
    pipe_state = Pipeline(settings, store, CollectingEvents(), NoDlq()).state
    events = [{"event_id": f"e{i}", "type": "cluster.born", "n": i} for i in range(3)]
    req = CommitRequest({"f:0": 0}, {"f:0": 5}, None, events, {"docs": 5})
    assert store.commit(pipe_state, req).outcome is CommitOutcome.COMMITTED
    pending = RedisStore(client, "t").outbox_pending()
    assert pending == events and [e.raw for e in pending] == [event_json(e) for e in events]
    assert store.outbox_length() == 3
    store.outbox_pending()
    store.ack(["e0", "e2"])
    # one commit is one outbox entry: it stays until every event in it was delivered (at least
    # once: a partly delivered commit is delivered again, as a partly failed send is)
    assert RedisStore(client, "t").outbox_pending() == events
    store.ack(["e1"])
    assert RedisStore(client, "t").outbox_pending() == [] and store.outbox_length() == 0


def test_each_replica_sends_its_own_events_and_takes_over_those_left_behind(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two replicas of one namespace: each sends its own commits' events (both sending every
    pending event sent many twice); a process's first look takes everything (a restarted one
    sends what its predecessor left), and another replica's events are taken once they have
    waited ORPHANED_EVENTS_AFTER_S (their writer died or cannot reach the broker)."""
    import noveld.state.redis.outbox as outbox

    client = redis.Redis.from_url(redis_url)
    settings = settings_for(tmp_path)
    a, b = RedisStore(client, "o"), RedisStore(client, "o")
    state_a = Pipeline(settings, a, CollectingEvents(), NoDlq()).state
    state_b = Pipeline(settings, b, CollectingEvents(), NoDlq()).state
    assert b.outbox_pending() == []  # b's first look: nothing left by anyone
    ev_a = [{"event_id": "a1", "type": "cluster.born"}]
    ev_b = [{"event_id": "b1", "type": "cluster.born"}]
    for store, state, part, ev in ((a, state_a, "f:0", ev_a), (b, state_b, "g:0", ev_b)):
        req = CommitRequest({part: 0}, {part: 5}, None, ev, {"docs": 5})
        assert store.commit(state, req).outcome is CommitOutcome.COMMITTED
    assert [e["event_id"] for e in b.outbox_pending()] == ["b1"]
    assert [e["event_id"] for e in RedisStore(client, "o").outbox_pending()] == ["a1", "b1"]
    monkeypatch.setattr(outbox, "ORPHANED_EVENTS_AFTER_S", 0.0)
    assert [e["event_id"] for e in b.outbox_pending()] == ["a1", "b1"]
    b.ack(["a1", "b1"])
    assert a.outbox_length() == 0


def test_outbox_entries_hold_a_bounded_number_of_events_and_go_when_delivered(
    redis_url: str, tmp_path: Path
) -> None:
    client = redis.Redis.from_url(redis_url)
    store = RedisStore(client, "big")
    state = Pipeline(
        load_settings(None, {"namespace": "big", "dlq": str(tmp_path / "dlq.jsonl")}),
        store, CollectingEvents(), NoDlq(),
    ).state  # fmt: skip
    n = 2 * OUTBOX_ENTRY_EVENTS + 5
    events = [{"event_id": f"x{i}", "type": "document.assigned", "doc": "é" * (i % 3)}
              for i in range(n)]  # fmt: skip
    assert store.commit(state, CommitRequest({"f:0": 0}, {"f:0": n}, None, events, {}))
    assert client.xlen("noveld:{big}:outbox") == 3  # 1000 + 1000 + 5 events
    pending = store.outbox_pending()
    assert pending == events and store.outbox_length() == n
    assert all(e.raw.isascii() for e in pending)  # non-ASCII text is \u-escaped
    store.ack([e["event_id"] for e in pending[:OUTBOX_ENTRY_EVENTS]])
    assert client.xlen("noveld:{big}:outbox") == 2
    assert RedisStore(client, "big").outbox_pending() == events[OUTBOX_ENTRY_EVENTS:]


def test_outbox_entries_of_earlier_versions_are_delivered(redis_url: str) -> None:
    """Before one entry per commit, each event was its own entry (fields id, event): an
    upgraded daemon still delivers and acknowledges those."""
    client = redis.Redis.from_url(redis_url)
    old = [{"event_id": f"o{i}", "type": "cluster.born", "n": i} for i in range(2)]
    for e in old:
        client.xadd("noveld:{old}:outbox", {"id": e["event_id"], "event": json.dumps(e)})
    store = RedisStore(client, "old")
    assert store.outbox_pending() == old and store.outbox_length() == 2
    store.ack(["o0"])
    assert RedisStore(client, "old").outbox_pending() == old[1:]


def test_a_fenced_writer_stops_instead_of_diverging(
    redis_url: str, stream: Path, tmp_path: Path
) -> None:
    """Another process claims the input after we started: our next commit is refused and the
    run stops with exit code 4, leaving Redis untouched by the stale writer."""
    client = redis.Redis.from_url(redis_url)
    settings = settings_for(tmp_path)
    key = f"{stream}:0"

    def usurp(_: Pipeline) -> None:
        RedisStore(client, "t").claim([key])

    code, _, _ = run_file(
        settings,
        str(stream),
        events_sink=CollectingEvents(),
        store=RedisStore(client, "t"),
        snapshot=False,
        on_start=usurp,
    )
    assert code == 4
    assert client.hget("noveld:{t}:offsets", key) is None  # nothing committed


def test_each_cluster_is_announced_and_ended_once_across_writers(
    redis_url: str, tmp_path: Path
) -> None:
    """The commit script's ``lifecycle`` check: a second ``cluster.born`` of a cluster (another
    writer confirmed it first) and a second end (``cluster.retired``/``cluster.merged``) are left
    out of the outbox and reported; a second birth is not counted; ends of clusters never
    announced pass, and a merge (its id names the pair) passes once."""
    client = redis.Redis.from_url(redis_url)
    settings = load_settings(None, {"namespace": "lc", "dlq": str(tmp_path / "dlq.jsonl")})
    a, b = RedisStore(client, "lc"), RedisStore(client, "lc")
    state = Pipeline(settings, a, CollectingEvents(), NoDlq()).state
    a.claim(["in:0"])
    b.claim(["in:1"])

    def ev(kind: str, cid: str, writer: str) -> dict[str, Any]:
        return {"event_id": f"{cid}-{kind}", "type": f"cluster.{kind}", "cluster_id": cid,
                "by": writer}  # fmt: skip

    def commit(store: RedisStore, key: str, offset: int, events: list[dict[str, Any]]) -> list[str]:
        births = sum(e["type"] == "cluster.born" for e in events)
        req = CommitRequest({key: offset}, {key: offset + 1}, None, events, {"births": births})
        result = store.commit(state, req)
        assert result.outcome is CommitOutcome.COMMITTED
        return list(result.suppressed)

    filler = {"event_id": "x", "type": "document.assigned", "cluster_id": "c1"}
    suppressed = commit(a, "in:0", 0, [ev("born", "c1", "a"), filler, ev("born", "c2", "a")])
    assert suppressed == []
    suppressed = commit(b, "in:1", 0, [ev("born", "c1", "b"), ev("born", "c3", "b")])
    assert suppressed == ["c1-born"]
    commit(b, "in:1", 1, [ev("retired", "c1", "b"), ev("merged", "c9", "b")])
    suppressed = commit(
        a, "in:0", 1, [ev("retired", "c1", "a"), ev("born", "c1", "a"), ev("merged", "c2", "a")]
    )
    assert suppressed == ["c1-retired", "c1-born"]
    suppressed = commit(b, "in:1", 2, [ev("merged", "c2", "b"), ev("merged", "c9", "b")])
    assert suppressed == ["c2-merged", "c9-merged"]

    kept = [(e["event_id"], e.get("by")) for e in RedisStore(client, "lc").outbox_pending()]
    assert kept == [
        ("c1-born", "a"), ("x", None), ("c2-born", "a"), ("c3-born", "b"),
        ("c1-retired", "b"), ("c9-merged", "b"), ("c2-merged", "a"),
    ]  # fmt: skip
    assert int(client.hget("noveld:{lc}:counters", "births") or 0) == 3
    assert client.hgetall("noveld:{lc}:lifecycle") == {
        b"c1": b"retired",
        b"c2": b"merged",
        b"c3": b"born",
        b"c2-merged": b"merged",  # each merge's event id
        b"c9-merged": b"merged",
    }  # c9 was never announced: only its merge is recorded


def test_an_end_offered_if_announced_is_kept_only_for_a_cluster_another_writer_announced(
    redis_url: str, tmp_path: Path
) -> None:
    """A writer retires a cluster it did not announce itself (another replica confirmed it,
    or a reload replaced its own record of what it announced): it offers the end
    ``if_announced``, and the script keeps it only when the lifecycle hash holds the cluster
    as born — not for a cluster nobody announced, not for one that already ended."""
    client = redis.Redis.from_url(redis_url)
    settings = load_settings(None, {"namespace": "ia", "dlq": str(tmp_path / "dlq.jsonl")})
    a, b = RedisStore(client, "ia"), RedisStore(client, "ia")
    state = Pipeline(settings, a, CollectingEvents(), NoDlq()).state
    a.claim(["in:0"])
    b.claim(["in:1"])

    def commit(store: RedisStore, key: str, offset: int, events: list[dict[str, Any]],
               offered: set[str]) -> list[str]:  # fmt: skip
        req = CommitRequest({key: offset}, {key: offset + 1}, None, events, {},
                            if_announced=frozenset(offered))  # fmt: skip
        result = store.commit(state, req)
        assert result.outcome is CommitOutcome.COMMITTED
        return list(result.suppressed)

    def ev(kind: str, cid: str) -> dict[str, Any]:
        return {"event_id": f"{cid}-{kind}", "type": f"cluster.{kind}", "cluster_id": cid}

    commit(a, "in:0", 0, [ev("born", "c1"), ev("born", "c2")], set())
    suppressed = commit(
        b, "in:1", 0, [ev("retired", "c1"), ev("retired", "c3")], {"c1-retired", "c3-retired"}
    )
    assert suppressed == ["c3-retired"]  # c3: nobody announced it
    suppressed = commit(b, "in:1", 1, [ev("retired", "c1")], {"c1-retired"})
    assert suppressed == ["c1-retired"]  # c1 already ended
    kept = [e["event_id"] for e in RedisStore(client, "ia").outbox_pending()]
    assert kept == ["c1-born", "c2-born", "c1-retired"]
    assert client.hgetall("noveld:{ia}:lifecycle") == {b"c1": b"retired", b"c2": b"born"}
