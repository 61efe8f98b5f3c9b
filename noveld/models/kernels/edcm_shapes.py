"""The EDCM's cluster shapes: the document-length bins, and s_k of Elkan's fixed point
(paper 002) solved by Newton's method, with the per-slot ``shape`` columns the seating reads
(:mod:`noveld.models.kernels.edcm`)."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from noveld.models.kernels.variational import digamma

N_EXACT = 64  # lengths 1..64 have a bin each
BINS_PER_OCTAVE = 8  # longer documents: 8 bins per doubling of the length
N_BINS = N_EXACT + 8 * BINS_PER_OCTAVE  # up to 64 · 2^8 = 16,384 tokens; longer share the last
_NEWTON_ITERATIONS = 100
# columns of the per-slot ``shape`` array (see :func:`reshape`)
S, D, LOG_MASS, LOG_DC, MASS, INV_DC = 0, 1, 2, 3, 4, 5
SHAPE_COLUMNS = 6


@njit(cache=True)
def length_bin(n: int) -> int:
    """Histogram bin of a document of ``n`` tokens (exact up to :data:`N_EXACT`)."""
    if n <= N_EXACT:
        return max(n, 1) - 1
    b = N_EXACT + int(BINS_PER_OCTAVE * math.log2(n / N_EXACT))
    return min(b, N_BINS - 1)


def bin_lengths() -> np.ndarray:
    """The length each bin stands for: exact below :data:`N_EXACT`, the geometric middle of
    the bin above."""
    out = np.empty(N_BINS)
    out[:N_EXACT] = np.arange(1, N_EXACT + 1)
    j = np.arange(N_BINS - N_EXACT)
    out[N_EXACT:] = N_EXACT * 2.0 ** ((j + 0.5) / BINS_PER_OCTAVE)
    return out


@njit(cache=True)
def trigamma(x: float) -> float:
    """ψ₁(x) for x > 0: the recurrence ψ₁(x) = ψ₁(x+1) + 1/x² up to x ≥ 10, then the
    asymptotic series (error < 1e-12 there)."""
    acc = 0.0
    while x < 10.0:
        acc += 1.0 / (x * x)
        x += 1.0
    inv = 1.0 / x
    inv2 = inv * inv
    series = inv * (
        1.0 + inv * (0.5 + inv * (1.0 / 6 - inv2 * (1.0 / 30 - inv2 * (1.0 / 42 - inv2 / 30))))
    )
    return acc + series


@njit(cache=True)
def shape_terms(hist: np.ndarray, lengths: np.ndarray, g: float, s: float) -> tuple[float, float]:
    """``(D(s), Σ_b h_b Σ_{i<n_b} i/(s+i)²)`` for one cluster's histogram row (raw, × g):
    ``D(s) = Σ_b h_b [ψ(s+n_b) − ψ(s)]`` and the second term is ``D(s) + s·D'(s)`` (the
    derivative :func:`solve_shape` needs). Exact bins sum their few terms; long ones use ψ, ψ₁."""
    d = 0.0
    dd = 0.0
    harmonic = 0.0  # Σ_{i<n} 1/(s+i) for n = b + 1, running
    weighted = 0.0  # Σ_{i<n} i/(s+i)², running
    last = -1
    for b in range(N_EXACT):
        if hist[b] != 0.0:
            last = b
    for b in range(last + 1):
        i = float(b)
        harmonic += 1.0 / (s + i)
        weighted += i / ((s + i) * (s + i))
        h = hist[b] * g
        if h != 0.0:
            d += h * harmonic
            dd += h * weighted
    for b in range(N_EXACT, hist.shape[0]):
        h = hist[b] * g
        if h != 0.0:
            n = lengths[b]
            hb = digamma(s + n) - digamma(s)
            d += h * hb
            dd += h * (hb - s * (trigamma(s) - trigamma(s + n)))
    return d, dd


@njit(cache=True)
def solve_shape(
    hist: np.ndarray, lengths: np.ndarray, g: float, total: float, c: float, s0: float
) -> tuple[float, float]:
    """``(s, D(s))`` solving ``s·(D(s) + c) = total`` with ``total = T + c·Σ_w b_w`` (module
    docstring). The left side rises from ``m`` (s → 0) to infinity, so the root is unique; it
    lies in ``(0, total/c]``. Newton on log s from ``s0``, falling back to bisection (in log s)
    whenever a step leaves the bracket."""
    hi = total / c
    d_hi, _ = shape_terms(hist, lengths, g, hi)
    if d_hi == 0.0:
        return hi, 0.0  # an empty cluster: the prior
    lo = hi * 1e-12
    x_lo, x_hi = math.log(lo), math.log(hi)
    s = min(max(s0, lo), hi)
    x = math.log(s)
    d = 0.0
    for _ in range(_NEWTON_ITERATIONS):
        s = math.exp(x)
        d, dd = shape_terms(hist, lengths, g, s)
        f = s * (d + c) - total
        if f > 0.0:
            x_hi = x
        else:
            x_lo = x
        slope = s * (c + dd)  # d f / d log s
        step = f / slope
        x_new = x - step
        if not (x_lo < x_new < x_hi):
            x_new = 0.5 * (x_lo + x_hi)
        if abs(x_new - x) < 1e-13 * max(1.0, abs(x)):
            x = x_new
            break
        x = x_new
    s = math.exp(x)
    d, _ = shape_terms(hist, lengths, g, s)
    return s, d


@njit(cache=True)
def solve_shapes(
    hist: np.ndarray,
    lengths: np.ndarray,
    m: np.ndarray,
    ntok: np.ndarray,
    alive: np.ndarray,
    kmax: int,
    g: float,
    c: float,
    vb0: float,
    discount: float,
    shape: np.ndarray,
) -> None:
    """:func:`reshape` every live cluster slot below ``kmax``."""
    for k in range(kmax):
        if alive[k]:
            reshape(k, hist, lengths, m, ntok, g, c, vb0, discount, shape)


@njit(cache=True)
def reshape(
    k: int,
    hist: np.ndarray,
    lengths: np.ndarray,
    m: np.ndarray,
    ntok: np.ndarray,
    g: float,
    c: float,
    vb0: float,
    discount: float,
    shape: np.ndarray,
) -> None:
    """Solve cluster ``k``'s row of ``shape`` — ``[s_k, D_k, log(m_k − d), log(D_k + c),
    m_k − d, 1/(D_k + c)]``, what seating needs of it in either domain — after a document
    joined or left it (warm-started from the previous ``s_k`` when there is one)."""
    total = max((ntok[k] - m[k]) * g, 0.0) + c * vb0
    start = shape[k, S] if shape[k, S] > 0.0 else total / c
    s, d = solve_shape(hist[k], lengths, g, total, c, start)
    shape[k, S] = s
    shape[k, D] = d
    mass = max(m[k] * g - discount, 1e-3)
    shape[k, LOG_MASS] = math.log(mass)
    shape[k, LOG_DC] = math.log(d + c)
    shape[k, MASS] = mass
    shape[k, INV_DC] = 1.0 / (d + c)
