"""The encoder's hot loop: mean-pool token rows into unit vectors (numba), beside its oracle."""

from __future__ import annotations

import math

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def mean_unit_rows(table: np.ndarray, ids: np.ndarray, bounds: np.ndarray, out: np.ndarray) -> None:
    """``out[d]`` = the unit-length sum of ``table``'s rows ``ids[bounds[d]:bounds[d + 1]]``
    (the mean's direction); a row with no tokens, or whose sum is zero, stays zero."""
    p = out.shape[1]
    for d in range(out.shape[0]):
        for t in range(bounds[d], bounds[d + 1]):
            row = ids[t]
            for j in range(p):
                out[d, j] += table[row, j]
        s = 0.0
        for j in range(p):
            s += out[d, j] * out[d, j]
        if s > 0.0:
            inv = 1.0 / math.sqrt(s)
            for j in range(p):
                out[d, j] *= inv


def mean_unit_rows_reference(table: np.ndarray, ids: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Slow oracle of :func:`mean_unit_rows`: the same sums in the same order, in Python."""
    n, p = bounds.shape[0] - 1, table.shape[1]
    out = np.zeros((n, p), dtype=np.float64)
    for d in range(n):
        acc = [0.0] * p
        for t in range(int(bounds[d]), int(bounds[d + 1])):
            row = table[int(ids[t])]
            for j in range(p):
                acc[j] += float(row[j])
        s = 0.0
        for j in range(p):
            s += acc[j] * acc[j]
        if s > 0.0:
            inv = 1.0 / math.sqrt(s)
            acc = [a * inv for a in acc]
        out[d] = acc
    return out
