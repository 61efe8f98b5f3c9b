"""Story summaries held as columns: a batch's change (:class:`StoriesChange`) and the live set
(:class:`StoryTable`), both updated with vectorised numpy so the hot path does O(1) Python work
per batch, plus a little per new exemplar, term list, merge and retirement.

Pure (no clock, no I/O). The per-summary dict functions of :mod:`noveld.models.stories` are
the oracle: a table folds exactly as :func:`noveld.models.stories.apply_delta` does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

import numpy as np

from noveld.models.kernels.stories import bucket_groups, fold_rows, shift_rows
from noveld.models.stories import StoryLimits, Summary, shift


@dataclass
class StoriesChange:
    """One batch's change to the summaries: per touched cluster (row ``i`` of the arrays) its
    newest bucket, first and last time, documents and ring of counts ending at ``head[i]``; new
    exemplars and fresh terms of a few; merges (uid, survivor) and dropped uids."""

    limits: StoryLimits
    uids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    head: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    born: np.ndarray = field(default_factory=lambda: np.zeros(0))
    last: np.ndarray = field(default_factory=lambda: np.zeros(0))
    docs: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    counts: np.ndarray = field(default_factory=lambda: np.zeros((0, 1), np.int64))
    exemplars: dict[int, list[list[Any]]] = field(default_factory=dict)
    terms: dict[int, list[list[Any]]] = field(default_factory=dict)
    merges: list[tuple[int, int]] = field(default_factory=list)
    dropped: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The change as the Redis commit script reads it, but for the touched clusters'
        numbers (packed apart): uids as decimal strings (Lua's numbers are doubles, and uids
        reach 2^60)."""
        lim = self.limits
        return {
            "uids": [str(u) for u in self.uids.tolist()],
            "exemplars": {str(u): e for u, e in self.exemplars.items()},
            "terms": {str(u): t for u, t in self.terms.items()},
            "merges": [[str(u), str(into)] for u, into in self.merges],
            "dropped": [str(u) for u in self.dropped],
            "limits": {
                "width": lim.bucket_seconds, "buckets": lim.buckets,
                "exemplars": lim.exemplars, "terms": lim.terms, "max": lim.max_stories,
            },
        }  # fmt: skip

    def summaries(self) -> dict[str, Summary]:
        """The touched clusters' deltas as summaries (for tests and the dict oracle)."""
        w = self.limits.bucket_seconds
        return {
            str(u): {
                "born": float(self.born[i]), "last": float(self.last[i]),
                "docs": int(self.docs[i]), "width": w, "head": int(self.head[i]),
                "counts": self.counts[i].tolist(), "terms": self.terms.get(u, []),
                "exemplars": self.exemplars.get(u, []),
            }
            for i, u in enumerate(self.uids.tolist())
        }  # fmt: skip


def batch_change(
    uids: np.ndarray,
    times: np.ndarray,
    doc_ids: Sequence[str],
    texts: Sequence[str | None],
    limits: StoryLimits,
    have: Mapping[int, int] | None = None,
) -> StoriesChange:
    """A batch's change, vectorised: document ``i`` (time ``times[i]``, epoch seconds) joined
    cluster ``uids[i]``. Exemplars are each cluster's first documents in the batch, taken for
    the clusters that ``have`` fewer than ``limits.exemplars`` (None: for all), text cut to
    ``limits.text_chars``, none unless ``limits.exemplar_text``."""
    change = StoriesChange(limits, counts=np.zeros((0, limits.buckets), np.int64))
    m = uids.shape[0]
    if m == 0:
        return change
    w, b = limits.bucket_seconds, limits.buckets
    order = np.argsort(uids, kind="stable")  # by cluster, in batch order within one
    sorted_uids = uids[order]
    step = np.empty(m, bool)
    step[0] = True
    np.not_equal(sorted_uids[1:], sorted_uids[:-1], out=step[1:])
    starts = np.flatnonzero(step)
    keys = sorted_uids[starts]
    k = keys.shape[0]
    group = np.cumsum(step) - 1  # cluster index of each sorted document
    bucket = np.floor(times / w).astype(np.int64)
    change.uids = keys
    change.head, change.born, change.last, change.docs, change.counts = bucket_groups(
        order, group, bucket, times.astype(np.float64), k, b
    )
    n = limits.exemplars
    if n == 0:
        return change
    sel = np.arange(m) - starts[group] < n  # each cluster's first n documents
    if have is not None:
        stored = np.fromiter(map(have.get, keys.tolist(), repeat(0)), np.int64, k)
        sel &= (stored < n)[group]
    pick = order[sel]
    ex = change.exemplars
    chars, with_text = limits.text_chars, limits.exemplar_text
    for i, uid in zip(pick.tolist(), uids[pick].tolist(), strict=True):
        txt = texts[i] if with_text else None
        row = [doc_ids[i], None if txt is None else txt[:chars]]
        if uid in ex:
            ex[uid].append(row)
        else:
            ex[uid] = [row]
    return change


class StoryTable:
    """The live summaries: numeric columns by row, exemplars and terms by uid."""

    def __init__(self, buckets: int = 24, width: int = 3600) -> None:
        self.buckets, self.width = buckets, width
        self.rows: dict[int, int] = {}
        self._free: list[int] = []
        self._next = 0  # rows handed out so far (freed ones are reused first)
        self.uid = np.zeros(0, np.int64)
        self.head = np.zeros(0, np.int64)
        self.born = np.zeros(0)
        self.last = np.zeros(0)
        self.docs = np.zeros(0, np.int64)
        self.counts = np.zeros((0, buckets), np.int64)
        self.exemplars: dict[int, list[list[Any]]] = {}
        self.terms: dict[int, list[list[Any]]] = {}

    def __len__(self) -> int:
        return len(self.rows)

    def rows_of(self, uids: list[int]) -> np.ndarray:
        """The row of each uid, -1 for a uid without a summary."""
        return np.fromiter(map(self.rows.get, uids, repeat(-1)), np.int64, len(uids))

    # ---- JSON ---------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Summary]:
        """uid (decimal string) → summary, the stored and exported form."""
        return {
            str(u): {
                "born": float(self.born[r]), "last": float(self.last[r]),
                "docs": int(self.docs[r]), "width": self.width, "head": int(self.head[r]),
                "counts": self.counts[r].tolist(), "terms": self.terms.get(u, []),
                "exemplars": self.exemplars.get(u, []),
            }
            for u, r in sorted(self.rows.items())
        }  # fmt: skip

    @classmethod
    def from_json(cls, stories: dict[str, Summary]) -> StoryTable:
        """A table of checked summaries (``stories_problem``); the ring length and width are
        the most common among them (others are shifted to it, or restart their counts)."""
        widths = [int(s["width"]) for s in stories.values()]
        lengths = [len(s["counts"]) for s in stories.values()]
        length = max(set(lengths), key=lengths.count) if lengths else 24
        width = max(set(widths), key=widths.count) if widths else 3600
        table = cls(length or 24, width)
        for key, s in stories.items():
            uid = int(key)
            r = table._row(uid)
            same = int(s["width"]) == table.width
            table.head[r] = int(s["head"]) if same else 0
            table.born[r], table.last[r] = float(s["born"]), float(s["last"])
            table.docs[r] = int(s["docs"])
            counts = shift(s["counts"], 0, 0, table.buckets) if same else [0] * table.buckets
            table.counts[r] = counts
            if s["terms"]:
                table.terms[uid] = [list(t) for t in s["terms"]]
            if s["exemplars"]:
                table.exemplars[uid] = [list(e) for e in s["exemplars"]]
        return table

    # ---- updates ------------------------------------------------------------------------------
    def _row(self, uid: int) -> int:
        """A fresh row for ``uid`` (no documents yet)."""
        if self._free:
            r = self._free.pop()
        else:
            r = self._next
            if r >= self.uid.shape[0]:
                self._grow(max(16, 2 * r))
            self._next += 1
        self.rows[uid] = r
        self.uid[r], self.head[r], self.docs[r] = uid, np.iinfo(np.int64).min, 0
        self.born[r], self.last[r] = np.inf, -np.inf
        self.counts[r] = 0
        return r

    def _grow(self, cap: int) -> None:
        if cap <= self.uid.shape[0]:
            return
        extra = cap - self.uid.shape[0]
        self.uid = np.concatenate([self.uid, np.zeros(extra, np.int64)])
        self.head = np.concatenate([self.head, np.zeros(extra, np.int64)])
        self.born = np.concatenate([self.born, np.zeros(extra)])
        self.last = np.concatenate([self.last, np.zeros(extra)])
        self.docs = np.concatenate([self.docs, np.zeros(extra, np.int64)])
        self.counts = np.concatenate([self.counts, np.zeros((extra, self.buckets), np.int64)])

    def _conform(self, limits: StoryLimits) -> None:
        """Take the change's ring length and width (settings changed between runs)."""
        if limits.buckets != self.buckets:
            b = limits.buckets
            old = self.counts
            self.counts = np.zeros((old.shape[0], b), np.int64)
            keep = min(b, old.shape[1])
            self.counts[:, b - keep :] = old[:, old.shape[1] - keep :]
            self.buckets = b
        if limits.bucket_seconds != self.width:
            self.width = limits.bucket_seconds
            self.counts[:] = 0
            self.head[:] = np.iinfo(np.int64).min

    def _free_row(self, uid: int) -> None:
        r = self.rows.pop(uid)
        self._free.append(r)
        self.exemplars.pop(uid, None)
        self.terms.pop(uid, None)

    def apply(self, change: StoriesChange) -> None:
        """Fold a batch's change in, in the commit script's order: the touched clusters (a
        new summary only while fewer than ``limits.max_stories`` are kept), then merges
        (folded into the survivor), then retired and merged clusters dropped."""
        lim = change.limits
        self._conform(lim)
        if change.uids.shape[0]:
            self._fold_batch(change)
        for uid, into in change.merges:
            self._merge(uid, into, lim)
        for uid in change.dropped:
            if uid in self.rows:
                self._free_row(uid)

    def _fold_batch(self, change: StoriesChange) -> None:
        lim = change.limits
        uids = change.uids.tolist()
        rows = self.rows_of(uids)
        for p in np.flatnonzero(rows < 0).tolist():
            if len(self.rows) >= lim.max_stories:
                break
            rows[p] = self._row(uids[p])
        fold_rows(
            rows, self.head, self.born, self.last, self.docs, self.counts,
            change.head, change.born, change.last, change.docs, change.counts,
        )  # fmt: skip
        n, kept, rows_of = lim.exemplars, self.exemplars, self.rows
        for uid, new in change.exemplars.items():
            if uid not in rows_of:
                continue
            old = kept.get(uid)
            kept[uid] = new[:n] if old is None else _joined(old, new, n)
        for uid, terms in change.terms.items():
            if uid in self.rows and terms:
                self.terms[uid] = terms[: lim.terms]

    def _merge(self, uid: int, into: int, lim: StoryLimits) -> None:
        g = self.rows.get(uid)
        if g is None:
            return
        s = self.rows.get(into)
        if s is None:  # the survivor had no summary: the merged one becomes its summary
            del self.rows[uid]
            self.rows[into] = g
            self.uid[g] = into
            for d in (self.exemplars, self.terms):
                if uid in d:
                    d[into] = d.pop(uid)
            return
        head = max(int(self.head[s]), int(self.head[g]))
        pair = np.array([s, g])
        gaps = head - self.head[pair]
        self.counts[s] = shift_rows(self.counts[pair], np.maximum(gaps, 0)).sum(axis=0)
        self.head[s] = head
        self.born[s] = min(self.born[s], self.born[g])
        self.last[s] = max(self.last[s], self.last[g])
        self.docs[s] += self.docs[g]
        ex = _joined(self.exemplars.get(into, []), self.exemplars.get(uid, []), lim.exemplars)
        if ex:
            self.exemplars[into] = ex
        self._free_row(uid)


def _joined(base: list[list[Any]], new: list[list[Any]], n: int) -> list[list[Any]]:
    """``base``'s exemplars then ``new``'s, at most ``n``, no document twice."""
    if len(base) >= n:
        return base
    seen = {e[0] for e in base}
    out = list(base)
    for e in new:
        if len(out) >= n:
            break
        if e[0] not in seen:
            seen.add(e[0])
            out.append(list(e))
    return out
