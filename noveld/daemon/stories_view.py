"""The live stories of a namespace as rows for ``noveld stories`` and the web view: the story
summaries kept in the state (noveld.models.stories) joined with each cluster's size from the
statistics and its known label.

"Now" is the stream's newest event time (the latest ``last`` of any summary), so an archive
replayed today shows the growth it had then; "recent" counts the documents of the ``window``
buckets ending at now.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from noveld.models.kernels.stories import FRESH
from noveld.models.stories import sparkline
from noveld.models.story_table import StoryTable
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


def _live_sizes(state: NamespaceState) -> tuple[np.ndarray, np.ndarray]:
    """(uids sorted, their sizes) of the live clusters (documents' mass, decayed)."""
    stats = state.stats
    slots = stats.active_slots()
    uids = stats.uid[slots]
    order = np.argsort(uids, kind="stable")
    return uids[order], stats.mass(slots)[order]


@dataclass(frozen=True)
class _Joined:
    """The summaries of the live clusters as columns (``row`` into the table), with each one's
    size and recent documents; ``now`` is the newest last-seen among them."""

    table: StoryTable
    uid: np.ndarray
    row: np.ndarray
    size: np.ndarray
    recent: np.ndarray
    now: float | None
    now_bucket: int
    window: int


def _join(state: NamespaceState, window: int) -> _Joined:
    """The live summaries of ``state`` joined with the sizes (vectorised over the table)."""
    table = state.stories
    live, mass = _live_sizes(state)
    n = len(table.rows)
    uid = np.fromiter(table.rows.keys(), np.int64, n)
    row = np.fromiter(table.rows.values(), np.int64, n)
    at = np.minimum(np.searchsorted(live, uid), max(live.shape[0] - 1, 0))
    keep = live[at] == uid if live.shape[0] else np.zeros(n, bool)
    keep &= table.head[row] != FRESH
    uid, row, size = uid[keep], row[keep], mass[at[keep]]
    if not uid.shape[0]:
        return _Joined(table, uid, row, size, np.zeros(0, np.int64), None, 0, window)
    now = float(table.last[row].max())
    now_bucket = int(np.floor(now / table.width))
    b = table.buckets
    # ring slot j of a row holds bucket head - (b-1) + j: recent ones are the last
    # (window - gap) slots, gap = now_bucket - head
    take = window - (now_bucket - table.head[row])
    recent = (table.counts[row] * (np.arange(b)[None, :] >= b - take[:, None])).sum(axis=1)
    return _Joined(table, uid, row, size, recent, now, now_bucket, window)


def _story_row(
    j: _Joined, i: int, known: dict[int, str], announced: set[int], growth_buckets: int | None
) -> StoryRow:
    t, r, uid = j.table, int(j.row[i]), int(j.uid[i])
    n = growth_buckets or t.buckets
    ring = {"head": int(t.head[r]), "counts": t.counts[r].tolist()}
    return StoryRow(
        uid=uid,
        size=float(j.size[i]),
        docs=int(t.docs[r]),
        recent=int(j.recent[i]),
        born=float(t.born[r]),
        last=float(t.last[r]),
        terms=t.terms.get(uid, []),
        exemplars=t.exemplars.get(uid, []),
        label=known.get(uid),
        announced=uid in announced,
        growth=sparkline(ring, j.now_bucket, n),
    )


def _known(state: NamespaceState) -> dict[int, str]:
    return {int(u): str(label) for u, label in state.novelty.get("known", {}).items()}


def _announced(state: NamespaceState) -> set[int]:
    return {int(u) for u in state.novelty.get("announced", [])}


def stories_view(
    state: NamespaceState,
    namespace: str,
    sort: SortKey = "growth",
    window: int = DEFAULT_WINDOW,
    limit: int | None = None,
    growth_buckets: int | None = None,
    only: Iterable[int] | None = None,
) -> StoriesView:
    """The live stories of ``state``: each summary of a cluster still live in the statistics,
    with its size, recent documents and growth ring (``growth_buckets`` long, default the
    summaries' own length), sorted by ``sort`` and cut to ``limit`` rows (of the stories
    ``only`` names, when given). Rows are built for the kept ones only."""
    j = _join(state, window)
    announced = _announced(state)
    pick = np.arange(j.uid.shape[0])
    if only is not None:
        wanted = np.array(sorted(only), np.int64)
        pick = pick[np.isin(j.uid, wanted)]
    t = j.table
    born = t.born[j.row[pick]]
    keys = {  # np.lexsort: the last key sorts first
        "growth": (j.uid[pick], -j.size[pick], -j.recent[pick]),
        "size": (j.uid[pick], -j.size[pick]),
        "age": (j.uid[pick], born),
        "birth": (j.uid[pick], -born),
    }[sort]
    order = pick[np.lexsort(keys)] if pick.shape[0] else pick
    total = int(order.shape[0])
    if limit is not None:
        order = order[:limit]
    known = _known(state)
    rows = [_story_row(j, i, known, announced, growth_buckets) for i in order.tolist()]
    return StoriesView(namespace, j.now, t.width, window, sort, total, rows)


def story_rows(
    state: NamespaceState,
    uids: Iterable[int],
    window: int = DEFAULT_WINDOW,
    growth_buckets: int | None = None,
) -> dict[int, StoryRow]:
    """The rows of the live stories ``uids`` that have a summary ("now" and "recent" as in
    :func:`stories_view`, over all live summaries)."""
    j = _join(state, window)
    where = dict(zip(j.uid.tolist(), range(j.uid.shape[0]), strict=True))
    known, announced = _known(state), _announced(state)
    return {
        u: _story_row(j, where[u], known, announced, growth_buckets) for u in uids if u in where
    }


def story_of_doc(state: NamespaceState, doc_id: str) -> int | None:
    """The live cluster whose exemplars hold document ``doc_id`` (None: not an exemplar)."""
    live, _ = _live_sizes(state)
    alive = set(live.tolist())
    for uid, exemplars in state.stories.exemplars.items():
        if uid in alive and any(e[0] == doc_id for e in exemplars):
            return uid
    return None
