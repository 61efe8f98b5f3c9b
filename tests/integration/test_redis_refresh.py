"""The pre-seat refresh (``batch.refresh``): a replica takes in the other replicas' commits
before it seats a batch, so a document of another replica's new story joins that story's
cluster, and every delta is applied once (the commit after a refresh does not apply again
what the refresh did)."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
from doubles import NoDlq
from helpers.partition_feed import PartitionFeed

from noveld.daemon.pipeline import Pipeline
from noveld.daemon.settings import Settings, load_settings, model_fingerprint
from noveld.daemon.sinks import CollectingEvents
from noveld.state.base import NamespaceState
from noveld.state.redis.keys import UID_SLOT_BITS
from noveld.state.redis.store import RedisStore
from noveld.synth import SynthConfig, generate

pytestmark = pytest.mark.integration

VOLCANO = "volcano eruption ash cloud grounds flights airport closed lava"


def replica(client: redis.Redis, settings: Settings, key: str) -> tuple[Pipeline, RedisStore]:
    store = RedisStore(client, settings.namespace)
    pipe = Pipeline(settings, store, CollectingEvents(), NoDlq())
    store.claim([key])
    return pipe, store


def slot_of(pipe: Pipeline, doc_id: str) -> int:
    """The uid slot of the cluster ``doc_id`` was seated in (from its assignment event)."""
    assert isinstance(pipe.events, CollectingEvents)
    for e in pipe.events.events:
        for a in e.get("assignments", []) if e["type"] == "documents.assigned" else []:
            if a["doc_id"] == doc_id:
                return int(a["cluster_id"][1:]) >> UID_SLOT_BITS
    raise AssertionError(f"{doc_id} was not assigned")


def same_counts(loaded: NamespaceState, live: NamespaceState) -> bool:
    """The same clusters with the same documents, tokens and word counts (keyed by word; up
    to the rounding of the hybrid's vector dimensions, which replicas add in another order)."""
    a, b = loaded.stats, live.stats
    uids = sorted(int(u) for u in a.uid[a.active_slots()])
    if uids != sorted(int(u) for u in b.uid[b.active_slots()]):
        return False
    for uid in uids:
        ka, kb = a.slot_of(uid), b.slot_of(uid)
        wa, ca = a.word_counts(ka)
        wb, cb = b.word_counts(kb)
        words_a = {loaded.vocab[w]: c * a.scale for w, c in zip(wa, ca, strict=True)}
        words_b = {live.vocab[w]: c * b.scale for w, c in zip(wb, cb, strict=True)}
        if (
            words_a.keys() != words_b.keys()
            or a.m[ka] * a.scale != pytest.approx(b.m[kb] * b.scale)
            or a.ntok[ka] * a.scale != pytest.approx(b.ntok[kb] * b.scale)
            or any(c != pytest.approx(words_b[w]) for w, c in words_a.items())
        ):
            return False
    return True


@pytest.mark.parametrize("refresh", [True, False])
def test_a_replica_seats_against_the_others_commits_and_applies_each_once(
    redis_url: str, tmp_path: Path, refresh: bool
) -> None:
    """a opens the volcano story; b, seating a volcano document next, joins a's cluster when
    it refreshes first, and opens a twin of its own when it takes a's commit in only at its
    own commit. Either way b ends with exactly the statistics a fresh load rebuilds from the
    log, and as many documents as both committed."""
    client = redis.Redis.from_url(redis_url)
    settings = load_settings(
        None,
        {"namespace": f"refresh-{refresh}", "dlq": str(tmp_path / "dlq.jsonl"),
         "model": {"deterministic": True}, "batch": {"refresh": refresh},
         "events": {"assignments": "batch"}},
    )  # fmt: skip
    (a, _), (b, b_store) = replica(client, settings, "in:0"), replica(client, settings, "in:1")
    fill = [str(d["text"]) for d in generate(SynthConfig(n_docs=120, n_stories=12, seed=5))]
    step = PartitionFeed().step

    step(a, 0, fill[:30])
    step(b, 1, fill[30:60])
    step(a, 0, [*fill[60:70], VOLCANO, VOLCANO, VOLCANO])  # the story opens on a
    step(b, 1, [*fill[70:75], VOLCANO])  # f1-35
    assert slot_of(a, "f0-40") == 0
    assert slot_of(b, "f1-35") == (0 if refresh else 1)  # a's cluster, or a twin on b
    assert b_store.refreshed == (2 if refresh else 0)  # a's two commits, each before seating
    step(a, 0, fill[75:95])
    step(b, 1, fill[95:120])

    loaded = RedisStore(client, settings.namespace).load(model_fingerprint(settings))
    assert loaded is not None
    docs = 30 + 30 + 13 + 6 + 20 + 25
    assert loaded.counters["docs"] == docs
    b._sync_state()
    stats = b.state.stats
    assert sum(stats.mass(stats.active_slots())) == pytest.approx(docs)
    assert same_counts(loaded, b.state)


def test_a_lone_writer_stops_reading_before_seating_until_another_writer_commits(
    redis_url: str, tmp_path: Path
) -> None:
    """One replica makes the pre-seat read once (it finds nobody) and then no more, so it pays
    no round trip per batch; another replica's commit, applied at its next commit, turns the
    read back on."""
    client = redis.Redis.from_url(redis_url)
    settings = load_settings(
        None, {"namespace": "lone", "dlq": str(tmp_path / "dlq.jsonl"),
               "model": {"deterministic": True}},
    )  # fmt: skip
    fill = [str(d["text"]) for d in generate(SynthConfig(n_docs=80, n_stories=8, seed=3))]
    step = PartitionFeed().step
    (a, a_store) = replica(client, settings, "in:0")

    for i in range(4):
        step(a, 0, fill[10 * i : 10 * i + 10])
    assert not a_store.others_writing  # the first batch's read found no other writer
    (b, _) = replica(client, settings, "in:1")
    step(b, 1, fill[40:50])
    step(a, 0, fill[50:60])  # applies b's entry at its commit: reading again
    assert a_store.others_writing
    step(b, 1, fill[60:70])
    step(a, 0, fill[70:80])
    assert a_store.refreshed == 1  # b's second batch, before a seated its last
