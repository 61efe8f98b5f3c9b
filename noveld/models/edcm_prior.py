"""The EDCM's prior over cluster shapes: the symmetric ``b0`` for short texts, leaning on the
corpus-wide EDCM as the corpus's documents grow long (paper 002's EDCM; see
:mod:`noveld.models.edcm`), and the per-batch shapes the seating reads."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from noveld.models.kernels import edcm as ekern

_BIN_LENGTHS = ekern.bin_lengths()


@dataclass(frozen=True)
class Prior:
    """The prior of every cluster's β: ``b_w = const + slope·df_w`` (df_w the live documents
    containing w), ``total = Σ_w b_w`` (the new cluster's shape s0)."""

    const: float
    slope: float
    total: float
    docs: float  # C = c + c', the prior's weight in documents

    def of(self, df: np.ndarray) -> np.ndarray:
        """``b_w`` of words with document frequencies ``df``."""
        return self.const + self.slope * df


def long_share(hist: np.ndarray, t: float, u_lo: float, u_hi: float) -> float:
    """How far the corpus is into the long-document regime: its mean distinct words per document
    ``ū = t / Σ hist`` mapped to 0 at ``ū ≤ u_lo``, 1 at ``ū ≥ u_hi``, linear between
    (``u_lo ≤ 0``: always 0)."""
    docs = float(hist.sum())
    if u_lo <= 0.0 or docs <= 0.0:
        return 0.0
    return min(max((t / docs - u_lo) / max(u_hi - u_lo, 1e-9), 0.0), 1.0)


def background_prior(
    hist: np.ndarray, t: float, n_words: int, b0: float, c: float, c_bg: float
) -> Prior:
    """The prior ``b_w = (c·b0 + c'·β⁰_w) / (c + c')``: ``c`` pseudo-documents of the symmetric
    ``b0`` and ``c'`` of the corpus EDCM ``β⁰``, the smoothed fixed point of one cluster holding
    every live document (length histogram ``hist``, true counts; ``t`` its (document, distinct
    word) pairs). ``c' = 0`` is the symmetric prior."""
    if c_bg <= 0.0 or t <= 0.0:
        return Prior(b0, 0.0, n_words * b0, c)
    total = t + c * n_words * b0
    _, d = ekern.solve_shape(hist, _BIN_LENGTHS, 1.0, total, c, total / c)
    whole = c + c_bg
    const = (c * b0 + c_bg * c * b0 / (d + c)) / whole
    slope = c_bg / ((d + c) * whole)
    return Prior(const, slope, n_words * const + slope * t, whole)


@dataclass(frozen=True)
class Shapes:
    """Every slot's length histogram (raw) and its row of :func:`ekern.reshape`
    (``s_k``, ``D_k`` and the two logarithms seating needs), and the batch's prior."""

    hist: np.ndarray
    shape: np.ndarray
    prior: Prior
    corpus_hist: np.ndarray
    corpus_t: float
