"""Bookkeeping of the hdp batch sampler: opening a category, moving a token's counts (sparse
indexes and the unused-topic tally kept exact) and a document's context (fields and vector)
in and out."""

from __future__ import annotations

import numpy as np
from numba import njit

from noveld.models.kernels.hdp_sampler.vectors import (
    add_vector_weights,
    has_vector,
    move_vector,
    vector_log_likelihood,
)
from noveld.models.kernels.hdp_scores.topics import (
    CATS,
    EMPTY_BELOW,
    FIRST_EMPTY,
    N_EMPTY,
    NEXT_UID,
    OVERFLOW,
    Arrays,
    context_log_likelihood,
)


@njit(cache=True)
def open_category(ctl: np.ndarray, cat: Arrays) -> int:
    """A new category's local index; −1 when the capacity is exhausted (``ctl[OVERFLOW]`` is
    set and the caller reruns the batch with more room)."""
    alive, uid = cat[3], cat[4]
    kc = ctl[CATS]
    if kc >= alive.shape[0]:
        ctl[OVERFLOW] = 1
        return -1
    ctl[CATS] = kc + 1
    alive[kc] = True
    uid[kc] = ctl[NEXT_UID]
    ctl[NEXT_UID] += 1
    return kc


@njit(cache=True, inline="always")
def _index_word_topic(w: int, y: int, nlw: np.ndarray, ix: Arrays) -> None:
    """List topic y among word w's topics (if absent), dropping stale entries when the word's
    slice is full (its room is its topics at the start plus its tokens, so it always fits)."""
    wz, wz_ptr, wzlen = ix[5], ix[6], ix[7]
    lo = wz_ptr[w]
    for q in range(lo, lo + wzlen[w]):
        if wz[q] == y:
            return
    if lo + wzlen[w] >= wz_ptr[w + 1]:
        n = 0
        for q in range(lo, lo + wzlen[w]):
            if nlw[w, wz[q]] > 0.0:
                wz[lo + n] = wz[q]
                n += 1
        wzlen[w] = n
    wz[lo + wzlen[w]] = y
    wzlen[w] += 1


@njit(cache=True, inline="always")
def move_token(
    w: int, y: int, k: int, s: float, vbeta: float, tw: Arrays, cat: Arrays, ix: Arrays,
    ctl: np.ndarray,
) -> None:  # fmt: skip
    """Add (s = 1) or remove (s = −1) one token of word w with topic y in category k, keeping
    ``inv``, ``Σ inv``, the sparse indexes and the unused-topic bookkeeping up to date."""
    nlw, nl, inv, inv_sum = tw
    okl, ok = cat[0], cat[1]
    nz, nzlen, innz, cz, czlen = ix[0], ix[1], ix[2], ix[3], ix[4]
    was_empty = nl[y] < EMPTY_BELOW
    had_word = nlw[w, y] > 0.0
    nlw[w, y] += s
    nl[y] += s
    old = inv[y]
    inv[y] = 1.0 / (vbeta + nl[y])
    inv_sum[0] += inv[y] - old
    okl[k, y] += s
    ok[k] += s
    if s > 0:
        if not innz[k, y]:
            innz[k, y] = True
            nz[k, nzlen[k]] = y
            nzlen[k] += 1
            cz[y, czlen[y]] = k
            czlen[y] += 1
        if not had_word:
            _index_word_topic(w, y, nlw, ix)
    is_empty = nl[y] < EMPTY_BELOW
    if was_empty and not is_empty:
        ctl[N_EMPTY] -= 1
        if ctl[FIRST_EMPTY] == y:
            nxt = -1
            for z in range(y + 1, nl.shape[0]):
                if nl[z] < EMPTY_BELOW:
                    nxt = z
                    break
            ctl[FIRST_EMPTY] = nxt
    elif is_empty and not was_empty:
        ctl[N_EMPTY] += 1
        if ctl[FIRST_EMPTY] < 0 or y < ctl[FIRST_EMPTY]:
            ctl[FIRST_EMPTY] = y


@njit(cache=True)
def has_context(d: int, cx: Arrays) -> bool:
    """Whether document d has context fields or a vector (observations of the category of
    the table that carries them)."""
    return bool(cx[0][d + 1] > cx[0][d]) or has_vector(d, cx)


@njit(cache=True)
def document_log_likelihood(d: int, k: int, eta: float, cx: Arrays) -> float:
    """Document d's context fields and vector under category k (``k < 0``: a new one)."""
    return context_log_likelihood(d, k, eta, cx) + vector_log_likelihood(d, k, cx)


@njit(cache=True)
def context_weights(
    d: int, kmax: int, eta: float, cx: Arrays, extra: np.ndarray, none: np.ndarray
) -> np.ndarray:
    """Document d's context (fields and vector) log likelihood under each category and a new
    one, or ``none`` (zeros) when it has no context."""
    if not has_context(d, cx):
        return none
    if cx[0][d + 1] > cx[0][d]:
        for k in range(kmax):
            extra[k] = context_log_likelihood(d, k, eta, cx)
        extra[kmax] = context_log_likelihood(d, -1, eta, cx)
    else:
        extra[: kmax + 1] = 0.0
    add_vector_weights(d, kmax, cx, extra)
    return extra


@njit(cache=True, inline="always")
def move_context(d: int, k: int, s: float, cx: Arrays) -> None:
    """Add (s = 1) or remove (s = −1) document d's context observations (fields and vector)
    in category k."""
    ctx_ptr, col_v, col_f, cvk = cx[0], cx[1], cx[2], cx[4]
    for j in range(ctx_ptr[d], ctx_ptr[d + 1]):
        cvk[k, col_v[j]] += s
        cvk[k, col_f[j]] += s
    move_vector(d, k, s, cx)
