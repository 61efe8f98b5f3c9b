"""The live stories of a namespace as rows for ``noveld stories`` and the web view: the story
summaries kept in the state (noveld.models.stories) joined with each cluster's size from the
statistics and its known label.

"Now" is the stream's newest event time (the latest ``last`` of any summary), so an archive
replayed today shows the growth it had then; "recent" counts the documents of the ``window``
buckets ending at now.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from noveld.models.stories import Summary, recent_docs, sparkline
from noveld.schema import format_rfc3339
from noveld.state.base import NamespaceState

SortKey = Literal["growth", "size", "age", "birth"]
SORT_KEYS: tuple[SortKey, ...] = ("growth", "size", "age", "birth")
"""growth: most documents in the recent window first (then size); size: largest first; age:
longest-lived first (earliest born); birth: newest first (latest born)."""

DEFAULT_WINDOW = 3
"""Buckets counted as "recent" by default (3 hours with the default hourly buckets)."""


@dataclass(frozen=True)
class StoryRow:
    """One live story as ``noveld stories --json`` lists it (:meth:`to_json`)."""

    uid: int
    size: float
    docs: int
    recent: int
    born: float
    last: float
    terms: list[list[Any]]
    exemplars: list[list[Any]]
    label: str | None
    announced: bool
    growth: list[int]

    def to_json(self, now: float) -> dict[str, Any]:
        """The row's JSON object (times in RFC 3339, exemplars as objects)."""
        return {
            "uid": self.uid,
            "cluster_id": f"c{self.uid}",
            "size": round(self.size, 3),
            "docs": self.docs,
            "recent": self.recent,
            "born_at": format_rfc3339(self.born),
            "last_seen": format_rfc3339(self.last),
            "age_seconds": round(max(0.0, now - self.born), 3),
            "top_terms": [[w, s] for w, s in self.terms],
            "exemplars": [{"doc_id": i, "text": t} for i, t in self.exemplars],
            "label": self.label,
            "announced": self.announced,
            "growth": self.growth,
        }


@dataclass(frozen=True)
class StoriesView:
    """The live stories of a namespace at one instant, sorted; ``total`` counts all of them
    (``rows`` may be cut by a limit)."""

    namespace: str
    now: float | None
    bucket_seconds: int
    window: int
    sort: SortKey
    total: int
    rows: list[StoryRow]

    def to_json(self) -> dict[str, Any]:
        """The JSON document of ``noveld stories --json`` (docs/operations.md)."""
        now = self.now or 0.0
        return {
            "namespace": self.namespace,
            "now": None if self.now is None else format_rfc3339(self.now),
            "bucket_seconds": self.bucket_seconds,
            "window_buckets": self.window,
            "sort": self.sort,
            "total": self.total,
            "stories": [r.to_json(now) for r in self.rows],
        }


def _sizes(state: NamespaceState) -> dict[int, float]:
    """Live cluster uid → its size (documents' mass, decayed under forgetting)."""
    stats = state.stats
    slots = stats.active_slots()
    return dict(zip(stats.uid[slots].tolist(), stats.mass(slots).tolist(), strict=True))


def _bucket_seconds(stories: dict[str, Summary]) -> int:
    """The bucket width most summaries were counted with (3600 when there are none)."""
    widths = [int(s["width"]) for s in stories.values()]
    return max(set(widths), key=widths.count) if widths else 3600


def stories_view(
    state: NamespaceState,
    namespace: str,
    sort: SortKey = "growth",
    window: int = DEFAULT_WINDOW,
    limit: int | None = None,
    growth_buckets: int | None = None,
) -> StoriesView:
    """The live stories of ``state``: each summary of a cluster still live in the statistics,
    with its size, recent documents and growth ring (``growth_buckets`` long, default the
    summaries' own length), sorted by ``sort`` and cut to ``limit`` rows."""
    sizes = _sizes(state)
    stored = state.stories.to_json()
    stories = {int(u): s for u, s in stored.items() if int(u) in sizes}
    width = _bucket_seconds(stored)
    now = max((float(s["last"]) for s in stories.values()), default=None)
    now_bucket = int(np.floor(now / width)) if now is not None else 0
    known = {int(u): str(label) for u, label in state.novelty.get("known", {}).items()}
    announced = {int(u) for u in state.novelty.get("announced", [])}
    rows = []
    for uid, s in stories.items():
        comparable = int(s["width"]) == width
        n = growth_buckets or len(s["counts"])
        rows.append(
            StoryRow(
                uid=uid,
                size=float(sizes[uid]),
                docs=int(s["docs"]),
                recent=recent_docs(s, now_bucket, window) if comparable else 0,
                born=float(s["born"]),
                last=float(s["last"]),
                terms=s["terms"],
                exemplars=s["exemplars"],
                label=known.get(uid),
                announced=uid in announced,
                growth=sparkline(s, now_bucket, n) if comparable else [0] * n,
            )
        )
    order = {
        "growth": lambda r: (-r.recent, -r.size, r.uid),
        "size": lambda r: (-r.size, r.uid),
        "age": lambda r: (r.born, r.uid),
        "birth": lambda r: (-r.born, r.uid),
    }[sort]
    rows.sort(key=order)
    total = len(rows)
    if limit is not None:
        rows = rows[:limit]
    return StoriesView(namespace, now, width, window, sort, total, rows)


def story_of_doc(state: NamespaceState, doc_id: str) -> int | None:
    """The live cluster whose exemplars hold document ``doc_id`` (None: not an exemplar)."""
    sizes = _sizes(state)
    for uid, exemplars in state.stories.exemplars.items():
        if uid in sizes and any(e[0] == doc_id for e in exemplars):
            return uid
    return None
