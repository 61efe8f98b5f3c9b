"""Kernels of the story summaries (noveld.models.story_table): bucketing a batch's documents
per cluster, and folding a batch's per-cluster rings into the table's rows — one call each
per batch instead of a score of small numpy calls. Beside each, its numpy oracle."""

from __future__ import annotations

import numba
import numpy as np

FRESH = np.iinfo(np.int64).min
"""The head of a row that has counted no document yet."""


@numba.njit(cache=True, nogil=True)
def bucket_groups(
    order: np.ndarray, group: np.ndarray, bucket: np.ndarray, times: np.ndarray, k: int, b: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per cluster ``g`` (documents ``order[j]`` with ``group[j] == g``, sorted by group):
    newest bucket, first and last time, documents, and the ring of ``b`` counts ending at the
    newest bucket (older documents fall off)."""
    head = np.full(k, FRESH, np.int64)
    born = np.full(k, np.inf)
    last = np.full(k, -np.inf)
    docs = np.zeros(k, np.int64)
    for j in range(order.shape[0]):
        i, g = order[j], group[j]
        if bucket[i] > head[g]:
            head[g] = bucket[i]
        born[g] = min(born[g], times[i])
        last[g] = max(last[g], times[i])
        docs[g] += 1
    ring = np.zeros((k, b), np.int64)
    for j in range(order.shape[0]):
        i, g = order[j], group[j]
        age = head[g] - bucket[i]
        if age < b:
            ring[g, b - 1 - age] += 1
    return head, born, last, docs, ring


def bucket_groups_oracle(
    order: np.ndarray, group: np.ndarray, bucket: np.ndarray, times: np.ndarray, k: int, b: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`bucket_groups` in numpy."""
    inv = np.empty(order.shape[0], np.int64)
    inv[order] = group
    head = np.full(k, FRESH, np.int64)
    np.maximum.at(head, inv, bucket)
    born = np.full(k, np.inf)
    np.minimum.at(born, inv, times)
    last = np.full(k, -np.inf)
    np.maximum.at(last, inv, times)
    age = head[inv] - bucket
    keep = age < b
    ring = np.bincount((inv * b + (b - 1) - age)[keep], minlength=k * b).reshape(k, b)
    return head, born, last, np.bincount(inv, minlength=k), ring


@numba.njit(cache=True, nogil=True)
def fold_rows(
    rows: np.ndarray,
    head: np.ndarray,
    born: np.ndarray,
    last: np.ndarray,
    docs: np.ndarray,
    counts: np.ndarray,
    c_head: np.ndarray,
    c_born: np.ndarray,
    c_last: np.ndarray,
    c_docs: np.ndarray,
    c_counts: np.ndarray,
) -> None:
    """Fold change row ``c`` into table row ``rows[c]`` (skipped when < 0), in place: both
    rings moved to the newer head and added, the earlier birth, the later last-seen."""
    b = counts.shape[1]
    for c in range(rows.shape[0]):
        r = rows[c]
        if r < 0:
            continue
        start = head[r]
        new = c_head[c] if start == FRESH or c_head[c] > start else start
        gap = 0 if start == FRESH else new - start
        if gap > 0:
            for j in range(b):
                counts[r, j] = counts[r, j + gap] if j + gap < b else 0
        gap = new - c_head[c]
        for j in range(b - gap if gap < b else 0):
            counts[r, j] += c_counts[c, j + gap]
        head[r] = new
        born[r] = min(born[r], c_born[c])
        last[r] = max(last[r], c_last[c])
        docs[r] += c_docs[c]


def fold_rows_oracle(
    rows: np.ndarray,
    head: np.ndarray,
    born: np.ndarray,
    last: np.ndarray,
    docs: np.ndarray,
    counts: np.ndarray,
    c_head: np.ndarray,
    c_born: np.ndarray,
    c_last: np.ndarray,
    c_docs: np.ndarray,
    c_counts: np.ndarray,
) -> None:
    """:func:`fold_rows` in numpy."""
    ok = rows >= 0
    r = rows[ok]
    start = head[r]
    fresh = start == FRESH
    new = np.maximum(np.where(fresh, c_head[ok], start), c_head[ok])
    counts[r] = shift_rows(counts[r], np.where(fresh, 0, new - start)) + shift_rows(
        c_counts[ok], new - c_head[ok]
    )
    head[r] = new
    born[r] = np.minimum(born[r], c_born[ok])
    last[r] = np.maximum(last[r], c_last[ok])
    docs[r] += c_docs[ok]


def shift_rows(counts: np.ndarray, gap: np.ndarray) -> np.ndarray:
    """Each row's ring moved ``gap[i]`` ≥ 0 buckets on: older buckets fall off the front."""
    if not gap.any():  # the usual case: the same newest bucket
        return counts
    b = counts.shape[1]
    idx = np.arange(b)[None, :] + gap[:, None]
    out = np.take_along_axis(counts, np.minimum(idx, b - 1), axis=1)
    out[idx >= b] = 0
    return out
