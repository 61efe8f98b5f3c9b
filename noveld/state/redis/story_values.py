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

from noveld.models.stories import Summary
from noveld.models.story_table import StoriesChange, StoryTable

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
    """A batch's touched clusters as the writer's table holds them after it (the commit script
    takes them as they are while no other writer committed since this writer loaded): those
    kept (``uids``) with their packed entries, and the text of those whose terms or exemplars
    changed (JSON, as the ``stories_text`` hash holds it)."""

    uids: list[str]
    entries: bytes
    texts: dict[str, str]


def folded(table: StoryTable, change: StoriesChange) -> Folded | None:
    """The touched clusters' entries as ``table`` holds them once ``change`` was applied to it
    (None when the change merged or dropped clusters, or the settings changed the rings: the
    commit script folds those)."""
    lim = change.limits
    if change.merges or change.dropped:
        return None
    if table.buckets != lim.buckets or table.width != lim.bucket_seconds:
        return None
    rows_of = table.rows
    keys = [u for u in change.uids.tolist() if u in rows_of]  # a full set takes no new one
    r = np.fromiter((rows_of[u] for u in keys), np.int64, len(keys))
    out = np.zeros(len(keys), record_dtype(lim.buckets))
    n = out["n"]
    n[:, 0], n[:, 1], n[:, 2] = table.born[r], table.last[r], table.docs[r]
    n[:, 3], n[:, 4] = lim.bucket_seconds, table.head[r]
    out["c"] = table.counts[r]
    texts: dict[str, str] = {}
    for uid in set(change.exemplars) | set(change.terms):
        if uid in rows_of:
            terms, ex = table.terms.get(uid, []), table.exemplars.get(uid, [])
            if terms or ex:
                texts[str(uid)] = json.dumps({"t": terms, "e": ex}, separators=(",", ":"))
    return Folded([str(u) for u in keys], out.tobytes(), texts)
