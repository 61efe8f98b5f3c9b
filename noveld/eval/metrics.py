"""External clustering metrics computed from a contingency table (no scikit-learn needed).

Definitions follow the usual ones: NMI with the arithmetic-mean normaliser, adjusted Rand index,
homogeneity / completeness / V-measure (Rosenberg & Hirschberg 2007) and purity.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

Labels: TypeAlias = Sequence[Any] | npt.NDArray[Any]
"""One label per item: any values comparable by their ``str()`` (list, tuple or numpy array)."""


def _codes(labels: Labels) -> npt.NDArray[np.intp]:
    """Dense 0-based codes of the labels' ``str()`` (built as a list first, so tuple labels stay
    one label each instead of becoming a 2-D array)."""
    keys = np.asarray([str(x) for x in labels])
    _, codes = np.unique(keys, return_inverse=True)
    return codes.reshape(-1)


def contingency(labels_true: Labels, labels_pred: Labels) -> np.ndarray:
    """Dense contingency table: rows are true classes, columns predicted clusters."""
    if len(labels_true) != len(labels_pred):
        raise ValueError("labels_true and labels_pred differ in length")
    t, p = _codes(labels_true), _codes(labels_pred)
    table = np.zeros((int(t.max(initial=-1)) + 1, int(p.max(initial=-1)) + 1), dtype=np.int64)
    np.add.at(table, (t, p), 1)
    return table


def _entropy(counts: np.ndarray) -> float:
    n = counts.sum()
    if n == 0:
        return 0.0
    p = counts[counts > 0] / n
    return float(-(p * np.log(p)).sum())


def _mutual_info(table: np.ndarray) -> float:
    n = table.sum()
    if n == 0:
        return 0.0
    rows = table.sum(axis=1, keepdims=True)
    cols = table.sum(axis=0, keepdims=True)
    nz = table > 0
    pij = table[nz] / n
    return float((pij * np.log(table[nz] * n / (rows @ cols)[nz])).sum())


def clustering_scores(labels_true: Labels, labels_pred: Labels) -> dict[str, float]:
    """nmi, ari, homogeneity, completeness, v_measure, purity of a clustering."""
    table = contingency(labels_true, labels_pred)
    n = int(table.sum())
    h_true = _entropy(table.sum(axis=1))
    h_pred = _entropy(table.sum(axis=0))
    # Rounding can push the computed MI a few ulps outside [0, min(H(C), H(K))], which would
    # report e.g. nmi = 1.0000000000000002 for a perfect clustering or a tiny negative
    # homogeneity; clip to the mathematically valid range.
    mi = min(max(_mutual_info(table), 0.0), min(h_true, h_pred))
    if h_true == 0 and h_pred == 0:
        nmi = 1.0
    else:
        nmi = mi / ((h_true + h_pred) / 2) if (h_true + h_pred) > 0 else 0.0
    homogeneity = 1.0 if h_true == 0 else mi / h_true
    completeness = 1.0 if h_pred == 0 else mi / h_pred
    vm = (
        0.0
        if homogeneity + completeness == 0
        else 2 * homogeneity * completeness / (homogeneity + completeness)
    )
    purity = float(table.max(axis=0).sum() / n) if n else 0.0
    return {
        "nmi": float(nmi),
        "ari": adjusted_rand(table),
        "homogeneity": float(homogeneity),
        "completeness": float(completeness),
        "v_measure": float(vm),
        "purity": purity,
    }


def _comb2(x: np.ndarray | float) -> Any:
    return np.asarray(x, dtype=np.float64) * (np.asarray(x, dtype=np.float64) - 1) / 2


def adjusted_rand(table: np.ndarray) -> float:
    """Adjusted Rand index (Hubert & Arabie 1985) of a contingency table."""
    n = table.sum()
    sum_ij = float(_comb2(table).sum())
    sum_a = float(_comb2(table.sum(axis=1)).sum())
    sum_b = float(_comb2(table.sum(axis=0)).sum())
    total = float(_comb2(n))
    if total == 0:
        return 1.0
    expected = sum_a * sum_b / total
    max_index = (sum_a + sum_b) / 2
    if max_index == expected:
        return 1.0
    return float((sum_ij - expected) / (max_index - expected))
