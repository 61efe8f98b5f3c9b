"""What the web view shows, behind one small interface: :class:`StoryFeed` gives the live
stories, the recent births and the status as JSON-able dicts, whatever holds them (the running
pipeline, a state dir's snapshot, a namespace in Redis).

The dicts' shapes are the view's API (``/api/stories``, ``/api/births``, ``/api/status``):

story
    ``uid`` (``"c<n>"``, as in events), ``size`` (documents, decayed under forgetting),
    ``recent`` (documents in the last window of document time, or None when unknown),
    ``sparkline`` (documents per time bucket up to the stream's newest, oldest first; may be
    empty), ``born_at`` and ``last_seen`` (RFC 3339 or None), ``top_terms``
    (``[[term, weight], …]``, weight = share of the story's tokens), ``exemplars``
    (``[{"id": …, "text": …?}, …]``, text when kept), ``label`` (a known label or None).
birth
    ``uid``, ``born_at`` (RFC 3339 or None), ``founding_doc_id`` (or None), ``top_terms``,
    ``size`` (now; 0 once the story ended), ``exemplars``, ``label``, ``live`` (still a story),
    ``noticed_at`` (RFC 3339 wall time the daemon committed the birth, or None: the timeline's
    time when the documents carry none), and the story's ``recent``, ``sparkline`` and
    ``last_seen``.
status
    ``namespace``, ``model`` (the engine), ``likelihood`` (or None), ``source`` (``daemon``,
    ``state-dir``, ``redis``), ``docs``,
    ``births``, ``clusters``, ``docs_per_s`` (over the last minute, None until two samples),
    ``lag_messages`` (Kafka consumer lag, None when unknown), ``last_commit_age_s`` (None when
    unknown), ``recent_window_s`` (the span ``recent`` counts, in document time, or None),
    ``bucket_s`` (the span of one sparkline point, or None),
    ``generated_at`` (RFC 3339).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

import numpy as np

from noveld.daemon.stories_view import StoryRow, stories_view, story_rows
from noveld.models.hdp import is_topic
from noveld.models.suffstats import MultinomialStats
from noveld.schema import format_rfc3339
from noveld.state.base import NamespaceState

Json = dict[str, Any]
TermsOf = Callable[[int, int], list[tuple[str, float]]]
"""``terms(uid, n)``: a story's ``n`` top terms with their weights."""

TOP_TERMS = 8
"""Top terms per story in the view."""


class FeedUnavailable(RuntimeError):
    """The state cannot be read now (the API answers 503 with this message)."""


class StoryFeed(Protocol):
    """The view's data source; each call returns fresh JSON-able dicts (shapes above)."""

    def stories(self, limit: int) -> list[Json]:
        """The ``limit`` largest live stories, largest first."""

    def births(self, limit: int) -> list[Json]:
        """The ``limit`` most recent births, newest first."""

    def status(self) -> Json:
        """Counts, throughput and lag."""


def now_rfc3339() -> str:
    """The wall clock as RFC 3339 (UTC, seconds)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def cluster_name(uid: int) -> str:
    """A story's id as events name its cluster."""
    return f"c{uid}"


def live_sizes(stats: MultinomialStats) -> tuple[np.ndarray, np.ndarray]:
    """(uids, sizes) of the live stories (hdp's topics left out), largest first."""
    slots = stats.active_slots()
    uids = stats.uid[slots]
    keep = ~is_topic(uids)
    uids, sizes = uids[keep], stats.mass(slots[keep])
    order = np.argsort(-sizes, kind="stable")
    return uids[order], sizes[order]


class TermsMemo:
    """Stories' top terms, computed again only when a story's token count changed: a watched
    page asks for the same stories every few seconds, and most did not grow meanwhile."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._kept: OrderedDict[tuple[int, int, float], list[tuple[str, float]]] = OrderedDict()

    def get(self, key: tuple[int, int, float], make: Callable[[], list[tuple[str, float]]]) -> Any:
        """The terms kept under ``key``, else ``make()``'s (kept, the oldest dropped)."""
        hit = self._kept.get(key)
        if hit is None:
            hit = self._kept[key] = make()
            if len(self._kept) > self.size:
                self._kept.popitem(last=False)
        else:
            self._kept.move_to_end(key)
        return hit


class StoryIndex:
    """One state's live stories by uid (one pass over the statistics): their slots, sizes and
    top terms (``terms``, remembered in ``memo`` while a story does not change)."""

    def __init__(
        self, stats: MultinomialStats, terms: TermsOf, memo: TermsMemo | None = None
    ) -> None:
        slots = stats.active_slots()
        uids = stats.uid[slots].tolist()
        self.stats = stats
        self.slot: dict[int, int] = dict(zip(uids, slots.tolist(), strict=True))
        self.mass: dict[int, float] = dict(zip(uids, stats.mass(slots).tolist(), strict=True))
        self._terms = terms
        self.memo = memo if memo is not None else TermsMemo()

    def size(self, uid: int) -> float:
        """The live story's size (0 once it ended)."""
        return round(self.mass.get(uid, 0.0), 3)

    def terms(self, uid: int, n: int = TOP_TERMS) -> list[list[Any]]:
        """The live story's top terms as ``[[term, weight], …]`` ([] once it ended)."""
        slot = self.slot.get(uid)
        if slot is None:
            return []
        key = (uid, n, float(self.stats.ntok[slot]))
        return [[t, w] for t, w in self.memo.get(key, lambda: self._terms(uid, n))]


def summary_fields(row: StoryRow | None) -> Json:
    """A story's growth, times and exemplars from its summary (empty without one: summaries
    off, or the set full)."""
    if row is None:
        return {"recent": None, "sparkline": [], "born_at": None, "last_seen": None,
                "exemplars": []}  # fmt: skip
    return {
        "recent": row.recent,
        "sparkline": row.growth,
        "born_at": format_rfc3339(row.born),
        "last_seen": format_rfc3339(row.last),
        "exemplars": [{"id": i, "text": t} if t else {"id": i} for i, t in row.exemplars],
    }


def story(index: StoryIndex, uid: int, labels: dict[int, str], row: StoryRow | None) -> Json:
    """One story: its size and terms from the statistics, the rest from its summary."""
    return {
        "uid": cluster_name(uid),
        "size": index.size(uid),
        **summary_fields(row),
        "top_terms": index.terms(uid),
        "label": labels.get(uid),
    }


def stories_of(
    index: StoryIndex, state: NamespaceState, labels: dict[int, str], limit: int
) -> list[Json]:
    """The ``limit`` largest live stories, with their summaries."""
    uids = live_sizes(index.stats)[0][:limit].tolist()
    rows = story_rows(state, uids)
    return [story(index, u, labels, rows.get(u)) for u in uids]


def rfc3339(t: float) -> str:
    """A Unix time as RFC 3339 (UTC, seconds)."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def birth_from_event(
    index: StoryIndex, event: Json, noticed: float | None = None, row: StoryRow | None = None
) -> Json:
    """A birth from its ``cluster.born`` event (committed at Unix time ``noticed``, when
    known), with the story's size, terms and summary now (its terms at birth once it ended)."""
    uid = int(str(event["cluster_id"])[1:])
    live = uid in index.slot
    born_at = event.get("born_at") or {}
    fields = summary_fields(row)
    if not fields["exemplars"]:
        fields["exemplars"] = [{"id": d} for d in event.get("exemplar_doc_ids", [])]
    return {
        "uid": event["cluster_id"],
        **fields,
        "born_at": born_at.get("ts") or fields["born_at"],
        "founding_doc_id": event.get("founding_doc_id"),
        "top_terms": index.terms(uid) if live else event.get("top_terms", []),
        "size": index.size(uid),
        "label": event.get("nearest_known_label"),
        "live": live,
        "noticed_at": None if noticed is None else rfc3339(noticed),
    }


def births_of(
    index: StoryIndex,
    state: NamespaceState,
    announced: Iterable[int],
    labels: dict[int, str],
    limit: int,
    recent: Sequence[tuple[float | None, Json]] = (),
) -> list[Json]:
    """The newest births: ``recent`` ``cluster.born`` events (newest last, each with the Unix
    time of its commit when known) first, then the announced stories by the birth their
    summaries record (newest first), then the announced ones without a summary (newest uid
    first: uids are handed out in birth order; no birth time is known)."""
    events = list(reversed(recent[-limit:]))
    uids = [int(str(e["cluster_id"])[1:]) for _, e in events]
    rows = story_rows(state, uids)
    out = [
        birth_from_event(index, e, t, rows.get(u)) for (t, e), u in zip(events, uids, strict=True)
    ]
    seen = set(uids)
    if len(out) < limit:
        told = {int(u) for u in announced}
        view = stories_view(state, "", "birth", limit=limit, only=told - seen)
        later = list(view.rows)
        seen.update(r.uid for r in later)
        rest = sorted(told - seen, reverse=True)
        pairs = [(r.uid, r) for r in later] + [(u, None) for u in rest]
        for uid, row in pairs[: limit - len(out)]:
            out.append(
                {
                    "uid": cluster_name(uid),
                    **summary_fields(row),
                    "founding_doc_id": None,
                    "top_terms": index.terms(uid),
                    "size": index.size(uid),
                    "label": labels.get(uid),
                    "live": uid in index.slot,
                    "noticed_at": None,
                }
            )
    return out


class Throughput:
    """Documents per second over the last ``window_s``, from the committed-document count
    sampled whenever the status is asked for (nothing on the hot path)."""

    def __init__(self, window_s: float = 60.0, clock: Callable[[], float] = time.monotonic):
        self.window_s = window_s
        self.clock = clock
        self.samples: deque[tuple[float, int]] = deque()

    def add(self, docs: int) -> float | None:
        """Record the count now; the rate over the window (None until two samples)."""
        now = self.clock()
        s = self.samples
        if s and docs < s[-1][1]:  # the namespace was replaced (state import): start again
            s.clear()
        s.append((now, docs))
        while len(s) > 2 and now - s[1][0] >= self.window_s:
            s.popleft()
        t0, d0 = s[0]
        if now - t0 < 0.5:
            return None
        return round((docs - d0) / (now - t0), 2)


class Cached:
    """A feed's answers kept for ``ttl_s`` (the page polls every few seconds; several tabs or
    a reload storm cost one computation a second), one computation at a time."""

    def __init__(self, feed: StoryFeed, ttl_s: float = 1.0) -> None:
        self.feed = feed
        self.ttl_s = ttl_s
        self._lock = threading.Lock()
        self._kept: dict[tuple[str, int], tuple[float, Any]] = {}

    def _get(self, key: tuple[str, int], make: Callable[[], Any]) -> Any:
        with self._lock:
            now = time.monotonic()
            hit = self._kept.get(key)
            if hit is not None and now - hit[0] < self.ttl_s:
                return hit[1]
            value = make()
            self._kept[key] = (time.monotonic(), value)
            return value

    def stories(self, limit: int) -> list[Json]:
        return list(self._get(("stories", limit), lambda: self.feed.stories(limit)))

    def births(self, limit: int) -> list[Json]:
        return list(self._get(("births", limit), lambda: self.feed.births(limit)))

    def status(self) -> Json:
        return dict(self._get(("status", 0), self.feed.status))
