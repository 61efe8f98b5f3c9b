"""The running daemon's feed: its pipeline's live state, read on request under the pipeline's
lock (a batch and a read never overlap), plus the ``cluster.born`` events the pipeline keeps.
The batch loop pays nothing for it but appending its births to a bounded deque."""

from __future__ import annotations

import time

from noveld.daemon.metrics import Metrics
from noveld.daemon.pipeline import Pipeline
from noveld.daemon.stories_view import DEFAULT_WINDOW
from noveld.daemon.web.feed import (
    Json,
    StoryIndex,
    TermsMemo,
    Throughput,
    births_of,
    now_rfc3339,
    stories_of,
)
from noveld.models.hdp import live_clusters


class PipelineFeed:
    """:class:`~noveld.daemon.web.feed.StoryFeed` of a pipeline in this process; ``metrics``
    (when the daemon keeps them) gives the Kafka consumer lag."""

    def __init__(self, pipeline: Pipeline, metrics: Metrics | None = None) -> None:
        self.pipeline = pipeline
        self.metrics = metrics
        self.throughput = Throughput()
        self.memo = TermsMemo()

    def stories(self, limit: int) -> list[Json]:
        p = self.pipeline
        with p.lock:
            index = StoryIndex(p.state.stats, p.top_terms, self.memo)
            return stories_of(index, p.state, dict(p.known_labels), limit)

    def births(self, limit: int) -> list[Json]:
        p = self.pipeline
        with p.lock:
            index = StoryIndex(p.state.stats, p.top_terms, self.memo)
            return births_of(
                index, p.state, list(p.announced), dict(p.known_labels), limit,
                list(p.recent_births),
            )  # fmt: skip

    def status(self) -> Json:
        p = self.pipeline
        with p.lock:
            counters = dict(p.state.counters)
            clusters = live_clusters(p.state.stats)
            width = p.state.stories.width
        docs = int(counters.get("docs", 0))
        m = self.metrics
        lag = None if m is None or m.last_lag is None else sum(m.last_lag.values())
        commit_age = None
        if m is not None:
            commit_age = round(max(0.0, time.time() - m.last_commit_time), 1)
        return {
            "namespace": p.settings.namespace,
            "model": p.model.kind,
            "likelihood": p.settings.model.likelihood,
            "source": "daemon",
            "docs": docs,
            "births": int(counters.get("births", 0)),
            "clusters": clusters,
            "docs_per_s": self.throughput.add(docs),
            "lag_messages": lag,
            "last_commit_age_s": commit_age,
            "recent_window_s": width * DEFAULT_WINDOW,
            "bucket_s": width,
            "generated_at": now_rfc3339(),
        }
