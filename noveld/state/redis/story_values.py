"""The ``stories`` hash's numeric entries, packed: a summary's born, last-seen, documents, bucket
width and newest bucket as five little-endian doubles, then its ring of counts as little-endian
uint32 (40 + 4·B bytes). The commit script unpacks, folds and packs them with Redis Lua's
``struct`` (far cheaper than JSON), and a batch's change travels to it the same way: one packed
record per touched cluster, in the order of its uids."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from noveld.models.kernels.stories import FRESH, fold_rows
from noveld.models.stories import Summary
from noveld.models.story_table import StoriesChange, StoryTable, joined

FIXED = 5
"""Doubles before the counts: born, last, docs, width, head."""

FIXED_BYTES = 8 * FIXED


def record_dtype(buckets: int) -> np.dtype[Any]:
    """One packed record with a ring of ``buckets`` counts."""
    return np.dtype([("n", "<f8", (FIXED,)), ("c", "<u4", (buckets,))])


def pack_change(change: StoriesChange) -> bytes:
    """The change's touched clusters as packed records (row ``i`` for ``change.uids[i]``)."""
    k, b = change.uids.shape[0], change.limits.buckets
    rows = np.zeros(k, record_dtype(b))
    if k:
        n = rows["n"]
        n[:, 0], n[:, 1], n[:, 2] = change.born, change.last, change.docs
        n[:, 3], n[:, 4] = change.limits.bucket_seconds, change.head
        rows["c"] = change.counts
    return rows.tobytes()


def pack_summary(s: Summary) -> bytes:
    """A stored summary's numbers, packed."""
    counts = s["counts"]
    rows = np.zeros(1, record_dtype(len(counts)))
    rows["n"][0] = [s["born"], s["last"], s["docs"], s["width"], s["head"]]
    rows["c"][0] = counts
    return rows.tobytes()


def unpack_numbers(raw: bytes) -> list[Any] | None:
    """``[born, last, docs, width, head, count…]`` of a packed entry (whole numbers as ints
    where they are whole), or None when ``raw`` is not one."""
    if len(raw) < FIXED_BYTES or (len(raw) - FIXED_BYTES) % 4:
        return None
    fixed = np.frombuffer(raw, "<f8", FIXED).tolist()
    counts = np.frombuffer(raw, "<u4", offset=FIXED_BYTES).tolist()
    for i in (2, 3, 4):
        v = fixed[i]
        if np.isfinite(v) and float(v).is_integer():
            fixed[i] = int(v)
    return [*fixed, *counts]


@dataclass
class Folded:
    """A batch's change as the writer's table will hold it once applied (the commit script
    takes it as is while no other writer committed since this writer loaded): the touched
    clusters kept (``uids``) with their packed entries, and the new text of those whose terms
    or exemplars changed (JSON, as the ``stories_text`` hash holds it)."""

    uids: list[str]
    entries: bytes
    texts: dict[str, str]


def folded(table: StoryTable, change: StoriesChange) -> Folded | None:
    """What :meth:`StoryTable.apply` will make of ``change``'s touched clusters, computed
    without changing ``table`` (None when the change merges or drops clusters, or the settings
    changed the rings: the commit script folds those)."""
    lim = change.limits
    if change.merges or change.dropped:
        return None
    if table.buckets != lim.buckets or table.width != lim.bucket_seconds:
        return None
    keys = change.uids.tolist()
    k = len(keys)
    get = table.rows.get
    rows = np.array([get(u, -1) for u in keys], np.int64)
    have = rows >= 0
    room = lim.max_stories - len(table.rows)
    kept = have.copy()
    for p in np.flatnonzero(~have).tolist():  # new summaries, in the table's order
        if room <= 0:
            break
        kept[p] = True
        room -= 1
    head = np.full(k, FRESH, np.int64)
    born, last = np.full(k, np.inf), np.full(k, -np.inf)
    docs = np.zeros(k, np.int64)
    counts = np.zeros((k, lim.buckets), np.int64)
    r = rows[have]
    head[have], born[have], last[have] = table.head[r], table.born[r], table.last[r]
    docs[have], counts[have] = table.docs[r], table.counts[r]
    at = np.where(kept, np.arange(k), -1)
    fold_rows(at, head, born, last, docs, counts,
              change.head, change.born, change.last, change.docs, change.counts)  # fmt: skip
    out = np.zeros(int(kept.sum()), record_dtype(lim.buckets))
    n = out["n"]
    n[:, 0], n[:, 1], n[:, 2] = born[kept], last[kept], docs[kept]
    n[:, 3], n[:, 4] = lim.bucket_seconds, head[kept]
    out["c"] = counts[kept]
    uids = [str(u) for u in change.uids[kept].tolist()]
    texts: dict[str, str] = {}
    alive = set(change.uids[kept].tolist())
    for uid in set(change.exemplars) | set(change.terms):
        if uid not in alive:
            continue
        new_terms = change.terms.get(uid)
        terms = new_terms[: lim.terms] if new_terms else table.terms.get(uid, [])
        ex = table.exemplars.get(uid)
        new = change.exemplars.get(uid)
        if new:
            ex = new[: lim.exemplars] if ex is None else joined(ex, new, lim.exemplars)
        if terms or ex:
            texts[str(uid)] = json.dumps({"t": terms, "e": ex or []}, separators=(",", ":"))
    return Folded(uids, out.tobytes(), texts)
