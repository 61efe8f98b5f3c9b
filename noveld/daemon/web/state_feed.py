"""The feed of a namespace whose daemon runs elsewhere (``noveld ui``): its stored state, read
afresh when it changed and never written. A state dir's snapshot is replaced by a rename, so
reading it while the daemon writes sees one whole snapshot (and takes no lock: the daemon holds
the directory's). A namespace in Redis is read in one transaction, as ``state show`` reads it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from noveld.daemon.stories_view import DEFAULT_WINDOW
from noveld.daemon.web.feed import (
    FeedUnavailable,
    Json,
    StoryIndex,
    Throughput,
    births_of,
    now_rfc3339,
    stories_of,
)
from noveld.daemon.web.terms import StoredTerms
from noveld.models.hdp import live_clusters
from noveld.state.base import NamespaceState
from noveld.state.memory import SNAPSHOT_NAME, read_snapshot

Loaded = tuple[NamespaceState, list[dict[str, Any]]]
"""A state and its undelivered events (whose ``cluster.born`` ones carry birth times)."""


class StoredFeed:
    """:class:`~noveld.daemon.web.feed.StoryFeed` over a loader of the stored state."""

    def __init__(
        self,
        source: str,
        namespace: str,
        load: Callable[[], Loaded | None],
        waiting: str,
        reload_s: float = 0.0,
    ) -> None:
        self.source = source
        self.namespace = namespace
        self._load = load
        self.waiting = waiting  # what the status says while there is no state yet
        self.throughput = Throughput()
        self._state: Loaded | None = None
        self._index: StoryIndex | None = None
        self.loaded_at: float | None = None  # wall time of the state read (a commit's, if known)
        self.reload_s = reload_s  # the least time between two loads
        self._read_at = -float("inf")

    def _current(self) -> tuple[NamespaceState, list[dict[str, Any]], StoryIndex] | None:
        now = time.monotonic()
        if now - self._read_at < self.reload_s:
            loaded = self._state
        else:
            loaded = self._load()
            self._read_at = now
        if loaded is not None and (self._state is None or loaded[0] is not self._state[0]):
            self._state = loaded
            stats = loaded[0].stats
            self._index = StoryIndex(stats, StoredTerms(stats, loaded[0].vocab))
        if self._state is None or self._index is None:
            return None
        return self._state[0], self._state[1], self._index

    def stories(self, limit: int) -> list[Json]:
        cur = self._current()
        if cur is None:
            return []
        state, _, index = cur
        return stories_of(index, state, _labels(state), limit)

    def births(self, limit: int) -> list[Json]:
        cur = self._current()
        if cur is None:
            return []
        state, outbox, index = cur
        born = [(None, e) for e in outbox if e.get("type") == "cluster.born"]
        announced = [int(u) for u in state.novelty.get("announced", [])]
        return births_of(index, state, announced, _labels(state), limit, born)

    def status(self) -> Json:
        cur = self._current()
        out: Json = {
            "namespace": self.namespace,
            "model": None,
            "likelihood": None,
            "source": self.source,
            "docs": 0,
            "births": 0,
            "clusters": 0,
            "docs_per_s": None,
            "lag_messages": None,
            "last_commit_age_s": None,
            "recent_window_s": None,
            "bucket_s": None,
            "generated_at": now_rfc3339(),
        }
        if cur is None:
            out["note"] = self.waiting
            return out
        state = cur[0]
        docs = int(state.counters.get("docs", 0))
        out.update(
            model=state.fingerprint.get("kind"),
            likelihood=state.fingerprint.get("likelihood"),
            docs=docs,
            births=int(state.counters.get("births", 0)),
            clusters=live_clusters(state.stats),
            docs_per_s=self.throughput.add(docs),
            recent_window_s=state.stories.width * DEFAULT_WINDOW,
            bucket_s=state.stories.width,
        )
        if self.loaded_at is not None:
            out["last_commit_age_s"] = round(max(0.0, time.time() - self.loaded_at), 1)
        return out


def _labels(state: NamespaceState) -> dict[int, str]:
    return {int(u): str(v) for u, v in state.novelty.get("known", {}).items()}


def state_dir_feed(state_dir: Path, namespace: str) -> StoredFeed:
    """The feed of a state dir: its snapshot, read again whenever it was replaced."""
    path = state_dir / SNAPSHOT_NAME
    seen: list[Any] = [None, None]  # (the file's identity, what was read from it)

    def load() -> Loaded | None:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        ident = (st.st_ino, st.st_mtime_ns, st.st_size)
        if ident != seen[0]:
            try:
                loaded = read_snapshot(path)
            except FileNotFoundError:  # replaced between the stat and the open: next time
                return seen[1]  # type: ignore[no-any-return]
            except ValueError as exc:
                raise FeedUnavailable(str(exc)) from exc
            seen[0], seen[1] = ident, loaded
            feed.loaded_at = st.st_mtime
        return seen[1]  # type: ignore[no-any-return]

    feed = StoredFeed(
        "state-dir", namespace, load, f"no snapshot in {state_dir} yet: the daemon writes one "
        "after its first batches (state.snapshot_interval_s)",
    )  # fmt: skip
    return feed


def redis_feed(store: Any, namespace: str) -> StoredFeed:
    """The feed of a namespace in Redis (``store``: a ``RedisStore``), read on every call
    (the caller caches the answers for a second or two)."""
    import redis

    from noveld.daemon.outage import outage_reason
    from noveld.state.redis.reasons import StoreConflict

    def load() -> Loaded | None:
        try:
            exported = store.export()  # one transaction: the state and its outbox
        except redis.RedisError as exc:
            raise FeedUnavailable(outage_reason(exc)) from exc
        except StoreConflict as exc:
            raise FeedUnavailable(str(exc)) from exc
        if exported is None:
            return None
        feed.loaded_at = None
        return exported[0], exported[1]

    feed = StoredFeed(
        "redis", namespace, load, f"namespace {namespace!r} has no state in Redis yet", 2.0
    )
    return feed
