"""Births across replicas of one namespace: a story whose documents land on two replicas is
confirmed by the documents both seated, and announced once, by the replica that opened it."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
from doubles import NoDlq
from helpers.partition_feed import PartitionFeed
from helpers.redis_commits import recorded_commits

from noveld.daemon.pipeline import Pipeline
from noveld.daemon.settings import Settings, load_settings
from noveld.daemon.sinks import CollectingEvents
from noveld.state.redis.keys import UID_SLOT_BITS
from noveld.state.redis.store import RedisStore
from noveld.synth import SynthConfig, generate

pytestmark = pytest.mark.integration

VOLCANO = "volcano eruption ash cloud grounds flights airport closed lava"


def replica(client: redis.Redis, settings: Settings, key: str) -> Pipeline:
    store = RedisStore(client, settings.namespace)
    pipe = Pipeline(settings, store, CollectingEvents(), NoDlq())
    store.claim([key])
    return pipe


@pytest.mark.parametrize("refresh", [True, False])
def test_a_story_seated_on_two_replicas_is_confirmed_by_both_and_announced_once(
    redis_url: str, tmp_path: Path, refresh: bool
) -> None:
    """a opens the volcano story with one document; b, having taken in a's cluster, seats two
    more into it. Neither replica alone holds min_size (3) documents of it; a counts b's two
    from b's delta — before seating its next batch (``batch.refresh``), which confirms the
    story, or at that batch's commit, and then the batch after confirms it — and announces
    the story once, founded by its own document."""
    client = redis.Redis.from_url(redis_url)
    settings = load_settings(
        None,
        {"namespace": f"foreign-{refresh}", "dlq": str(tmp_path / "dlq.jsonl"),
         "model": {"deterministic": True}, "batch": {"refresh": refresh}},
    )  # fmt: skip
    a, b = replica(client, settings, "in:0"), replica(client, settings, "in:1")
    fill = [str(d["text"]) for d in generate(SynthConfig(n_docs=120, n_stories=12, seed=5))]
    feed = PartitionFeed()
    a_commits = recorded_commits(a.store)  # type: ignore[arg-type]

    step = feed.step

    step(a, 0, fill[:30])
    step(b, 1, fill[30:60])
    step(a, 0, [*fill[60:80], VOLCANO])  # the story opens on a: one document
    step(b, 1, fill[80:85])  # b takes in a's cluster at its commit
    step(b, 1, [VOLCANO, VOLCANO])  # and seats two more documents of the story
    step(a, 0, fill[85:95])  # a takes in b's batches before seating, or at its commit
    assert bool(a_commits[-1].foreign_docs) is not refresh
    # b's last two batches (a's commit took the first in: its first batch had found no other
    # writer, so a's second did not read before seating)
    assert a.store.refreshed == (2 if refresh else 0)  # type: ignore[attr-defined]
    step(a, 0, fill[95:105])
    step(b, 1, fill[105:115])
    assert isinstance(a.events, CollectingEvents) and isinstance(b.events, CollectingEvents)
    events = a.events.events + b.events.events
    volcano = [
        e for e in events
        if e["type"] == "cluster.born" and e["founding_doc_id"] in ("f0-50", "f1-35", "f1-36")
    ]  # fmt: skip
    assert len(volcano) == 1
    (born,) = volcano
    assert born in a.events.events
    assert int(born["cluster_id"][1:]) >> UID_SLOT_BITS == 0  # a's cluster
    assert born["founding_doc_id"] == "f0-50"
    confirmed_at = born["confirmed_at"]["partition"], born["confirmed_at"]["offset"]
    assert confirmed_at == ((0, 51) if refresh else (0, 61))


def test_a_candidates_window_counts_the_documents_every_replica_seated(
    redis_url: str, tmp_path: Path
) -> None:
    """``novelty.confirm_within`` counts the namespace's documents, not the replica's own: a
    story a opened and that got no more documents while b seated 45 others has expired at a's
    next batch (the window is 40), so b's two late documents of it announce nothing. Counted
    in a's own documents (5 since the birth), the window would still be open."""
    client = redis.Redis.from_url(redis_url)
    settings = load_settings(
        None,
        {"namespace": "foreign-window", "dlq": str(tmp_path / "dlq.jsonl"),
         "model": {"deterministic": True}, "novelty": {"confirm_within": 40}},
    )  # fmt: skip
    a, b = replica(client, settings, "in:0"), replica(client, settings, "in:1")
    fill = [str(d["text"]) for d in generate(SynthConfig(n_docs=140, n_stories=12, seed=5))]
    step = PartitionFeed().step

    step(a, 0, fill[:30])
    step(b, 1, fill[30:60])
    step(a, 0, [*fill[60:80], VOLCANO])  # f0-50 opens the story on a
    (cand,) = [c for c in a.live.tracker.candidates.values() if c.founding_doc_id == "f0-50"]
    assert cand.born_index == 30 + 20  # a's commit applies b's 30 only after seating
    step(b, 1, fill[80:125])
    step(a, 0, fill[125:130])  # a takes in b's batches before seating: 126 documents counted
    assert all(c.founding_doc_id != "f0-50" for c in a.live.tracker.candidates.values())
    assert all(c.born_index >= 126 for c in a.live.tracker.candidates.values())
    step(b, 1, [VOLCANO, VOLCANO])
    step(a, 0, fill[130:140])
    assert isinstance(a.events, CollectingEvents) and isinstance(b.events, CollectingEvents)
    founders = {e["founding_doc_id"] for e in a.events.events + b.events.events
                if e["type"] == "cluster.born"}  # fmt: skip
    assert founders.isdisjoint({"f0-50", "f1-75", "f1-76"})
