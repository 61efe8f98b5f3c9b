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

from noveld.models.kernels.edcm_shapes import (
    BINS_PER_OCTAVE,
    INV_DC,
    LOG_DC,
    LOG_MASS,
    MASS,
    N_BINS,
    N_EXACT,
    SHAPE_COLUMNS,
    D,
    S,
    bin_lengths,
    length_bin,
    reshape,
    shape_terms,
    solve_shape,
    solve_shapes,
    trigamma,
)
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

#: the seating and, re-exported from :mod:`~noveld.models.kernels.edcm_shapes`, the shapes
__all__ = [
    "BINS_PER_OCTAVE",
    "INV_DC",
    "LOG_DC",
    "LOG_MASS",
    "MASS",
    "N_BINS",
    "N_EXACT",
    "SHAPE_COLUMNS",
    "D",
    "S",
    "bin_lengths",
    "document_frequencies",
    "gather_histograms",
    "length_bin",
    "log_rising",
    "reshape",
    "score_document",
    "score_document_linear",
    "seat_batch",
    "shape_terms",
    "solve_shape",
    "solve_shapes",
    "trigamma",
]


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
