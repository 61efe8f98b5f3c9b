"""numba kernels for CRP seating under the EDCM likelihood (paper 002 eq. 2).

Paper 002 eq. 2 (Elkan 2006): ``EDCM(x | β) = n! Γ(s)/Γ(s+n) Π_{w: x_w ≥ 1} β_w / x_w`` with
``s = Σ_w β_w``. Only *whether* a word occurs enters the parameters, which is how the EDCM
models burstiness: a word's second occurrence in a document costs almost nothing.

Statistics live in the postings pool of :mod:`~noveld.models.kernels.multinomial` (raw values,
true = raw × g):

* entry (w, k) holds ``df_kw``: how many of cluster k's documents contain w;
* ``ntok[k] = T_k + m_k``: the cluster's (document, distinct word) pairs plus one per document;
* the document-length histogram ``h_kb`` lives on reserved length-bin entries (one per
  document, :func:`length_bin`) and is gathered into a dense (clusters × bins) array per batch.

Parameters of cluster k: Elkan's maximum-likelihood fixed point ``β_w = df_w / Σ_d [ψ(s+n_d) −
ψ(s)]`` smoothed toward a prior ``β_w = b_w`` by ``c`` pseudo-documents::

    β_kw = (df_kw + c·b_w) / (D_k(s_k) + c),   D_k(s) = Σ_b h_kb [ψ(s + n_b) − ψ(s)],
    s_k  = Σ_w β_kw = (T_k + c·Σ_w b_w) / (D_k(s_k) + c)      (solved by :func:`solve_shape`)

``b_w`` is the symmetric ``b0`` or, for long documents, leans on the corpus EDCM
(:mod:`noveld.models.edcm`); the kernels take ``c·b_w`` per word and ``Σ_w b_w``. An empty
cluster has ``β_w = b_w`` and ``s = Σ_w b_w = s0``: the new-cluster predictive. Seating (the CRP
of :mod:`~noveld.models.kernels.multinomial`, Pitman–Yor discount included)::

    log p(z=k)   = log(m_k − d) + log Γ(s_k)/Γ(s_k+n) + Σ_{w∈x} log β_kw
    log p(z=new) = log(α + d·K) + log Γ(s0)/Γ(s0+n) + Σ_{w∈x} log b_w

written relative to ``log n! − Σ_w log x_w + Σ_{w∈x} log(c·b_w)`` (the same for every option), so
a word only costs the clusters in its postings.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from noveld.models.kernels.multinomial import (
    KMAX,
    LINEAR_MAX_LEN,
    MARGIN_CAP,
    _close_if_empty,
    add_document,
    choose,
    choose_linear,
    log_rising,
    open_cluster,
)
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
def score_document(
    words: np.ndarray,
    n: int,
    lp: np.ndarray,
    alive: np.ndarray,
    shape: np.ndarray,
    head: np.ndarray,
    nxt: np.ndarray,
    pk: np.ndarray,
    pc: np.ndarray,
    kmax: int,
    g: float,
    c: float,
    cb: np.ndarray,
    s0: float,
    log_alpha_new: float,
    discount: float,
) -> float:
    """Fill ``lp[:kmax]`` with log seating weights of a document with distinct words ``words``
    and ``n`` tokens; return the new-cluster weight (module docstring; dead slots get −inf).
    ``cb[j]`` is ``c·b_w`` of ``words[j]`` (the prior's pseudo-count of the word) and ``s0``
    the prior's ``Σ_w b_w``. ``shape`` holds each live slot's row of :func:`reshape`, so a
    cluster costs one logarithm."""
    u = words.shape[0]
    n_alive = 0
    for k in range(kmax):
        if alive[k]:
            n_alive += 1
            lp[k] = shape[k, LOG_MASS] - log_rising(shape[k, S], n) - u * shape[k, LOG_DC]
        else:
            lp[k] = -np.inf
    nv = head.shape[0]
    for j in range(u):
        w = words[j]
        if w >= nv:
            continue
        e = head[w]
        while e >= 0:
            k = pk[e]
            x = pc[e] * g
            if x > 0.0 and alive[k]:
                lp[k] += math.log1p(x / cb[j])
            e = nxt[e]
    a_new = math.exp(log_alpha_new) + discount * n_alive
    return math.log(a_new) - log_rising(s0, n) - u * math.log(c)


@njit(cache=True)
def score_document_linear(
    words: np.ndarray,
    n: int,
    wt: np.ndarray,
    alive: np.ndarray,
    shape: np.ndarray,
    head: np.ndarray,
    nxt: np.ndarray,
    pk: np.ndarray,
    pc: np.ndarray,
    kmax: int,
    g: float,
    c: float,
    cb: np.ndarray,
    s0: float,
    alpha_new: float,
    discount: float,
) -> float:
    """Linear-domain twin of :func:`score_document` for ``n ≤ LINEAR_MAX_LEN`` (the hot path):
    ``wt[k] = exp(lp[k])`` and the return value is ``exp(lp_new)``. ``Γ(s+n)/Γ(s)`` and
    ``(D_k + c)^u`` are products of at most 16 factors each, so a cluster costs no logarithm
    and every weight stays within float64 range, as in the multinomial kernel."""
    u = words.shape[0]
    n_alive = 0
    for k in range(kmax):
        if alive[k]:
            n_alive += 1
            s = shape[k, S]
            rising = 1.0
            for i in range(n):
                rising *= s + i
            q = shape[k, INV_DC]
            scale = 1.0
            for _ in range(u):
                scale *= q
            wt[k] = shape[k, MASS] * scale / rising
        else:
            wt[k] = 0.0
    nv = head.shape[0]
    for j in range(u):
        w = words[j]
        if w >= nv:
            continue
        e = head[w]
        while e >= 0:
            k = pk[e]
            x = pc[e] * g
            if x > 0.0 and alive[k]:
                wt[k] *= 1.0 + x / cb[j]
            e = nxt[e]
    rising = 1.0
    for i in range(n):
        rising *= s0 + i
    return (alpha_new + discount * n_alive) / (rising * c**u)


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


@njit(cache=True)
def seat_batch(
    doc_ptr: np.ndarray,
    doc_words: np.ndarray,
    doc_ones: np.ndarray,
    doc_entries: np.ndarray,
    doc_tokens: np.ndarray,
    doc_bin: np.ndarray,
    uniforms: np.ndarray,
    n_sweeps: int,
    log_alpha: float,
    c: float,
    doc_cb: np.ndarray,
    sb: float,
    deterministic: bool,
    g: float,
    discount: float,
    m: np.ndarray,
    ntok: np.ndarray,
    alive: np.ndarray,
    fresh: np.ndarray,
    uid: np.ndarray,
    head: np.ndarray,
    nxt: np.ndarray,
    pk: np.ndarray,
    pc: np.ndarray,
    free_stack: np.ndarray,
    ictl: np.ndarray,
    hist: np.ndarray,
    lengths: np.ndarray,
    shape: np.ndarray,
    lp: np.ndarray,
    assign: np.ndarray,
    log_norm: np.ndarray,
    margin: np.ndarray,
    forced: np.ndarray,
) -> None:
    """Sequential CRP seating of a batch under the EDCM, then ``n_sweeps`` collapsed Gibbs
    sweeps over it (as :func:`~noveld.models.kernels.multinomial.seat_batch`).

    Document d's entries ``doc_ptr[d]:doc_ptr[d+1]`` are its distinct words followed by its
    length-bin entry, each with count 1 (``doc_ones``); ``doc_entries[d]`` is their number (what
    ``ntok`` counts), ``doc_tokens[d]`` its length n and ``doc_bin[d]`` its histogram bin.
    ``doc_cb`` holds ``c·b_w`` of each entry (the length-bin entry's is unused) and ``sb`` the
    prior's ``Σ_w b_w``, both fixed for the batch. ``hist`` and
    ``shape`` (from :func:`solve_shapes`) are kept current as documents move. Outputs as in the
    multinomial kernel.
    """
    nb = doc_tokens.shape[0]
    out = np.empty(2)
    weight = 1.0 / g
    alpha_new = math.exp(log_alpha)
    vb0 = sb
    s0 = sb
    u_i = 0
    for sweep in range(n_sweeps + 1):
        for d in range(nb):
            entries = doc_words[doc_ptr[d] : doc_ptr[d + 1]]
            ones = doc_ones[doc_ptr[d] : doc_ptr[d + 1]]
            words = entries[:-1]
            cb = doc_cb[doc_ptr[d] : doc_ptr[d + 1] - 1]
            n = doc_tokens[d]
            b = doc_bin[d]
            if sweep > 0 and forced[d] >= 0:
                u_i += 1  # keep the random stream aligned with unforced runs
                continue
            if sweep > 0:
                k_old = assign[d]
                add_document(
                    k_old, entries, ones, doc_entries[d], -weight, m, ntok, head, nxt, pk, pc, ictl
                )
                hist[k_old, b] -= weight
                _close_if_empty(
                    k_old, entries, m, ntok, alive, fresh, head, nxt, pk, pc, free_stack, ictl,
                    weight,
                )  # fmt: skip
                if alive[k_old]:
                    reshape(k_old, hist, lengths, m, ntok, g, c, vb0, discount, shape)
            kmax = ictl[KMAX]
            if n <= LINEAR_MAX_LEN:
                w_new = score_document_linear(
                    words, n, lp, alive, shape, head, nxt, pk, pc, kmax, g, c, cb, s0, alpha_new,
                    discount,
                )  # fmt: skip
                k = choose_linear(lp, kmax, w_new, uniforms[u_i], deterministic, out, uid)
            else:
                lp_new = score_document(
                    words, n, lp, alive, shape, head, nxt, pk, pc, kmax, g, c, cb, s0, log_alpha,
                    discount,
                )  # fmt: skip
                k = choose(lp, kmax, lp_new, uniforms[u_i], deterministic, out, uid)
            u_i += 1
            if sweep == 0:
                log_norm[d] = out[0]
                margin[d] = out[1]
            if forced[d] >= 0:
                k = forced[d]
                margin[d] = -MARGIN_CAP
            if k < 0:
                k = open_cluster(alive, uid, fresh, free_stack, ictl)
                m[k] = 0.0
                ntok[k] = 0.0
                hist[k, :] = 0.0
                shape[k, S] = 0.0
            add_document(k, entries, ones, doc_entries[d], weight, m, ntok, head, nxt, pk, pc, ictl)
            hist[k, b] += weight
            reshape(k, hist, lengths, m, ntok, g, c, vb0, discount, shape)
            assign[d] = k


@njit(cache=True)
def gather_histograms(
    bin_words: np.ndarray,
    head: np.ndarray,
    nxt: np.ndarray,
    pk: np.ndarray,
    pc: np.ndarray,
    out: np.ndarray,
) -> None:
    """``out[k, b]`` = raw count of cluster k on length-bin entry ``bin_words[b]`` (``out``
    zeroed by the caller; words beyond the pool's vocabulary have no postings yet)."""
    nv = head.shape[0]
    for b in range(bin_words.shape[0]):
        w = bin_words[b]
        if w >= nv:
            continue
        e = head[w]
        while e >= 0:
            k = pk[e]
            if k < out.shape[0]:
                out[k, b] += pc[e]
            e = nxt[e]


@njit(cache=True)
def document_frequencies(
    words: np.ndarray,
    head: np.ndarray,
    nxt: np.ndarray,
    pk: np.ndarray,
    pc: np.ndarray,
    alive: np.ndarray,
    g: float,
    out: np.ndarray,
) -> None:
    """``out[j]`` = true number of live documents containing ``words[j]`` (summed over the
    live clusters' postings; words beyond the pool's vocabulary have none)."""
    nv = head.shape[0]
    for j in range(words.shape[0]):
        w = words[j]
        acc = 0.0
        if w < nv:
            e = head[w]
            while e >= 0:
                if alive[pk[e]]:
                    acc += pc[e]
                e = nxt[e]
        out[j] = acc * g
