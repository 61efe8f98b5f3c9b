"""Two ``hdp`` replicas sharing a Redis namespace: a story that reaches both in one round ends as
one category, the one with the lower uid, through one ``cluster.merged`` that the replica which
opened the other category emits; both replicas and a fresh load agree on the statistics."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import redis
from doubles import NoDlq
from helpers.partition_feed import PartitionFeed

from noveld.daemon.pipeline import Pipeline
from noveld.daemon.settings import load_settings, model_fingerprint
from noveld.daemon.sinks import CollectingEvents
from noveld.state.base import state_digest
from noveld.state.redis.keys import UID_SLOT_BITS
from noveld.state.redis.store import RedisStore
from noveld.synth import SynthConfig, generate

pytestmark = pytest.mark.integration


def test_a_story_opened_by_two_hdp_replicas_at_once_becomes_one_category(
    redis_url: str, tmp_path: Path
) -> None:
    client = redis.Redis.from_url(redis_url)
    settings = load_settings(
        None,
        {
            "namespace": "hdp2",
            "dlq": str(tmp_path / "dlq.jsonl"),
            "model": {"kind": "hdp", "deterministic": True},
            "events": {"assignments": "batch"},
            # b seats the story as if at once with a (a's commit landing while b steps)
            "batch": {"refresh": False},
        },
    )
    pipes = []
    for key in ("in:0", "in:1"):
        store = RedisStore(client, "hdp2")
        pipes.append(Pipeline(settings, store, CollectingEvents(), NoDlq()))
        store.claim([key])
    a, b = pipes
    fill = [str(d["text"]) for d in generate(SynthConfig(n_docs=200, n_stories=12, seed=5))]
    feed = PartitionFeed()

    step = feed.step

    step(a, 0, fill[:20])
    step(b, 1, fill[20:40])
    step(a, 0, fill[40:60])
    volcano = ["volcano eruption ash cloud grounds flights airport closed lava"] * 3
    firsts = [f"v0-{feed.at[0]}", f"v1-{feed.at[1]}"]
    step(a, 0, volcano, "v")  # both seat the story before either sees the other's batch
    step(b, 1, volcano, "v")
    for i in range(4):
        step(a if i % 2 == 0 else b, i % 2, fill[60 + 20 * i : 80 + 20 * i])
    a.step([], {}, {})  # take in b's last batch
    b.step([], {}, {})
    assert isinstance(a.events, CollectingEvents) and isinstance(b.events, CollectingEvents)
    events = a.events.events + b.events.events
    assigned = {
        x["doc_id"]: x["cluster_id"]
        for e in events
        if e["type"] == "documents.assigned"
        for x in e["assignments"]
    }
    first = {assigned[d] for d in firsts}
    assert len(first) == 2  # each replica opened a category of its own slot
    merged = [e for e in events if e["type"] == "cluster.merged" and e["cluster_id"] in first]
    assert len(merged) == 1 and merged[0] in b.events.events  # b merges away its own
    src, into = merged[0]["cluster_id"], merged[0]["into"]
    assert int(src[1:]) >> UID_SLOT_BITS == 1 and int(into[1:]) >> UID_SLOT_BITS == 0
    loaded = RedisStore(client, "hdp2").load(model_fingerprint(settings))
    assert loaded is not None
    for pipe in (a, b):
        pipe._sync_state()
        assert state_digest(loaded) == state_digest(replace(pipe.state, offsets=loaded.offsets))
