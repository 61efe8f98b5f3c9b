"""numba kernels of the two-level category/topic HDP (LBPL-NTM, paper 000 §3; DESIGN §5.3).

L topics ``φ_l ~ Dir(β)`` over words; categories ``θ_k ~ Dir(ζ)`` over topics; each document is a
restaurant of the Chinese restaurant franchise whose tables serve categories, and each word
draws a topic ``y ~ θ_{k_t}`` of its table's category and the word from ``φ_y``. Counts:
``nlw`` (topic × word), ``nl`` (topic totals), ``okl`` (category × topic), ``ok`` (category
totals), ``mk`` (tables serving category k). Conditionals (paper 000):

- eq. 4/5: ``f(y | θ_k) = (ζ + O_ky) / (Lζ + O_k)``, new category ``1/L``
- eq. 3: table of a word ∝ ``s_t f(y | θ_{k_t})``, new table ∝ ``α G(y)`` with
  ``G(y) = (Σ_k m_k f(y|θ_k) + γ/L) / (M + γ)`` (the new table's category integrated out)
- eq. 6: category of a table ∝ ``m_k Π_{n at t} f(y_n | θ_k)`` (sequentially, counts updated
  word by word), new ∝ ``γ Π f(y_n | θ_new)``
- eq. 7: topic of a word ∝ ``f(l | θ_{k_t}) (β + n_lw)/(Vβ + n_l)``

This module holds the conditionals, tested against closed forms, and the densifying gather; the
per-batch sampler is :mod:`noveld.models.kernels.hdp_sampler`.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True)
def f_topic(k: int, y: int, okl: np.ndarray, ok: np.ndarray, zeta: float, n_topics: int) -> float:
    """Eq. 4 (k ≥ 0) / eq. 5 (k < 0: a new category): predictive of topic y under category k."""
    if k < 0:
        return 1.0 / n_topics
    return (zeta + okl[k, y]) / (n_topics * zeta + ok[k])


@njit(cache=True)
def new_table_weights(
    okl: np.ndarray,
    ok: np.ndarray,
    mk: np.ndarray,
    alive: np.ndarray,
    kmax: int,
    zeta: float,
    gamma: float,
    out: np.ndarray,
) -> None:
    """``out[y] = G(y)``: the predictive of topic y at a new table, its category integrated out
    (``Σ_k m_k f(y|θ_k) + γ/L``, over ``M + γ``)."""
    n_topics = out.shape[0]
    total = gamma
    for y in range(n_topics):
        out[y] = gamma / n_topics
    for k in range(kmax):
        if alive[k] and mk[k] > 0:
            total += mk[k]
            for y in range(n_topics):
                out[y] += mk[k] * (zeta + okl[k, y]) / (n_topics * zeta + ok[k])
    for y in range(n_topics):
        out[y] /= total


@njit(cache=True)
def table_category_logweights(
    ys: np.ndarray,
    okl: np.ndarray,
    ok: np.ndarray,
    mk: np.ndarray,
    alive: np.ndarray,
    kmax: int,
    zeta: float,
    gamma: float,
    out: np.ndarray,
) -> float:
    """Eq. 6 for one table whose words have topics ``ys``: ``out[k] = log m_k + Σ_n log f(y_n |
    θ_k)`` with the table's own earlier words counted (sequential predictive); returns the new
    category's ``log γ + Σ_n log f(y_n | θ_new)``. The table must already be removed from the
    counts."""
    n_topics = okl.shape[1]
    n = ys.shape[0]
    for k in range(kmax):
        if not alive[k] or mk[k] <= 0:
            out[k] = -np.inf
            continue
        lw = math.log(mk[k])
        for i in range(n):
            own = 0
            for j in range(i):
                if ys[j] == ys[i]:
                    own += 1
            lw += math.log((zeta + okl[k, ys[i]] + own) / (n_topics * zeta + ok[k] + i))
        out[k] = lw
    lw_new = math.log(gamma)
    for i in range(n):
        own = 0
        for j in range(i):
            if ys[j] == ys[i]:
                own += 1
        lw_new += math.log((zeta + own) / (n_topics * zeta + i))
    return lw_new


@njit(cache=True)
def _pick(weights: np.ndarray, n: int, u: float, deterministic: bool) -> int:
    """Argmax (``deterministic``) or a draw with uniform ``u`` from ``weights[:n]``."""
    if deterministic:
        best = 0
        for i in range(1, n):
            if weights[i] > weights[best]:
                best = i
        return best
    total = 0.0
    for i in range(n):
        total += weights[i]
    target = u * total
    acc = 0.0
    for i in range(n):
        acc += weights[i]
        if acc >= target and weights[i] > 0.0:
            return i
    return n - 1


@njit(cache=True)
def _move_token(
    w: int, y: int, k: int, s: float, nlw: np.ndarray, nl: np.ndarray, okl: np.ndarray,
    ok: np.ndarray,
) -> None:  # fmt: skip
    nlw[y, w] += s
    nl[y] += s
    okl[k, y] += s
    ok[k] += s


@njit(cache=True)
def hdp_batch(
    doc_ptr: np.ndarray,
    tok_word: np.ndarray,
    known: np.ndarray,
    n_sweeps: int,
    rng_u: np.ndarray,
    deterministic: bool,
    beta: float,
    vbeta: float,
    zeta: float,
    alpha: float,
    gamma: float,
    nlw: np.ndarray,
    nl: np.ndarray,
    okl: np.ndarray,
    ok: np.ndarray,
    mk: np.ndarray,
    alive: np.ndarray,
    uid: np.ndarray,
    ctl: np.ndarray,
    tok_y: np.ndarray,
    tok_t: np.ndarray,
    tab_doc: np.ndarray,
    tab_k: np.ndarray,
    tab_size: np.ndarray,
    first_sweep: int = 0,
    n_tab_in: int = 0,
) -> int:
    """Seat a batch in the franchise, then ``n_sweeps`` Gibbs sweeps over its own variables:
    per word its table (eq. 3) and topic (eq. 7), then per table its category (eq. 6).

    Document d's tokens are ``tok_word[doc_ptr[d]:doc_ptr[d+1]]``; ``known[d] ≥ 0`` fixes its
    category (all its words at one table serving it). ``ctl = [kmax, next_uid]``; capacity
    must allow one new category per token. Tables are numbered within the batch; returns how many
    were used. In the first pass a word's topic is summed out of the table and category choices
    (it has none yet). ``rng_u`` needs ``4 × tokens × (1 + n_sweeps)`` uniforms. With
    ``first_sweep = s > 0`` the call continues an earlier one (which used ``n_tab_in`` tables)
    at sweep ``s``: the caller may change α or γ in between.
    """
    n_topics = nl.shape[0]
    n_docs = doc_ptr.shape[0] - 1
    gvec = np.empty(n_topics)
    phi = np.empty(n_topics)
    wts = np.empty(max(n_topics, tok_word.shape[0], okl.shape[0]) + 1)
    tabs = np.empty(tok_word.shape[0], dtype=np.int64)
    ys = np.empty(tok_word.shape[0], dtype=np.int64)
    n_tab = n_tab_in
    ui = 4 * tok_word.shape[0] * first_sweep
    for sweep in range(first_sweep, n_sweeps + 1):
        for d in range(n_docs):
            lo, hi = doc_ptr[d], doc_ptr[d + 1]
            for i in range(lo, hi):
                w = tok_word[i]
                if sweep > 0:  # take the word out of its table
                    t = tok_t[i]
                    _move_token(w, tok_y[i], tab_k[t], -1.0, nlw, nl, okl, ok)
                    tab_size[t] -= 1
                    if tab_size[t] == 0:
                        mk[tab_k[t]] -= 1
                for y in range(n_topics):
                    phi[y] = (beta + nlw[y, w]) / (vbeta + nl[y])
                # the word's table (eq. 3)
                if known[d] >= 0:
                    t = -1
                    for j in range(lo, hi):
                        if j != i and (sweep > 0 or j < i) and tab_size[tok_t[j]] > 0:
                            t = tok_t[j]
                            break
                    if t < 0:
                        t = n_tab
                        n_tab += 1
                        tab_doc[t] = d
                        tab_k[t] = known[d]
                        tab_size[t] = 0
                        mk[known[d]] += 1
                else:
                    n_open = 0
                    for j in range(lo, hi):  # the document's open tables, each once
                        if j == i or (sweep == 0 and j > i):
                            continue
                        tj = tok_t[j]
                        if tab_size[tj] <= 0:
                            continue
                        seen = False
                        for q in range(n_open):
                            if tabs[q] == tj:
                                seen = True
                        if not seen:
                            tabs[n_open] = tj
                            n_open += 1
                    for q in range(n_open):
                        k = tab_k[tabs[q]]
                        if sweep == 0:
                            acc = 0.0
                            for y in range(n_topics):
                                acc += f_topic(k, y, okl, ok, zeta, n_topics) * phi[y]
                        else:
                            acc = f_topic(k, tok_y[i], okl, ok, zeta, n_topics)
                        wts[q] = tab_size[tabs[q]] * acc
                    new_table_weights(okl, ok, mk, alive, ctl[0], zeta, gamma, gvec)
                    acc = 0.0
                    if sweep == 0:
                        for y in range(n_topics):
                            acc += gvec[y] * phi[y]
                    else:
                        acc = gvec[tok_y[i]]
                    wts[n_open] = alpha * acc
                    c = _pick(wts, n_open + 1, rng_u[ui], deterministic)
                    ui += 1
                    if c < n_open:
                        t = tabs[c]
                    else:
                        t = n_tab
                        n_tab += 1
                        tab_doc[t] = d
                        tab_size[t] = 0
                        kmax = ctl[0]
                        for k in range(kmax):  # the new table's category: eq. 6, one word
                            if alive[k] and mk[k] > 0:
                                if sweep == 0:
                                    acc = 0.0
                                    for y in range(n_topics):
                                        acc += f_topic(k, y, okl, ok, zeta, n_topics) * phi[y]
                                else:
                                    acc = f_topic(k, tok_y[i], okl, ok, zeta, n_topics)
                                wts[k] = mk[k] * acc
                            else:
                                wts[k] = 0.0
                        if sweep == 0:
                            acc = 0.0
                            for y in range(n_topics):
                                acc += phi[y] / n_topics
                        else:
                            acc = 1.0 / n_topics
                        wts[kmax] = gamma * acc
                        kc = _pick(wts, kmax + 1, rng_u[ui], deterministic)
                        ui += 1
                        if kc == kmax:
                            kc = ctl[0]
                            ctl[0] = kc + 1
                            alive[kc] = True
                            uid[kc] = ctl[1]
                            ctl[1] += 1
                        tab_k[t] = kc
                        mk[kc] += 1
                tok_t[i] = t
                # the word's topic given its table's category (eq. 7)
                k = tab_k[t]
                for y in range(n_topics):
                    wts[y] = f_topic(k, y, okl, ok, zeta, n_topics) * phi[y]
                tok_y[i] = _pick(wts, n_topics, rng_u[ui], deterministic)
                ui += 1
                _move_token(w, tok_y[i], k, 1.0, nlw, nl, okl, ok)
                tab_size[t] += 1
            if known[d] >= 0:
                continue
            # each open table's category (eq. 6), the table taken out first
            for t in range(n_tab):
                if tab_doc[t] != d or tab_size[t] <= 0:
                    continue
                n = 0
                for i in range(lo, hi):
                    if tok_t[i] == t:
                        ys[n] = tok_y[i]
                        n += 1
                        _move_token(tok_word[i], tok_y[i], tab_k[t], -1.0, nlw, nl, okl, ok)
                mk[tab_k[t]] -= 1
                kmax = ctl[0]
                lw_new = table_category_logweights(
                    ys[:n], okl, ok, mk, alive, kmax, zeta, gamma, wts
                )
                wts[kmax] = lw_new
                top = -np.inf
                for k in range(kmax + 1):
                    top = max(top, wts[k])
                for k in range(kmax + 1):
                    wts[k] = math.exp(wts[k] - top) if wts[k] > -np.inf else 0.0
                kc = _pick(wts, kmax + 1, rng_u[ui], deterministic)
                ui += 1
                if kc == kmax:
                    kc = ctl[0]
                    ctl[0] = kc + 1
                    alive[kc] = True
                    uid[kc] = ctl[1]
                    ctl[1] += 1
                tab_k[t] = kc
                mk[kc] += 1
                for i in range(lo, hi):
                    if tok_t[i] == t:
                        _move_token(tok_word[i], tok_y[i], kc, 1.0, nlw, nl, okl, ok)
    return n_tab


@njit(cache=True)
def gather_postings(
    words: np.ndarray,
    head: np.ndarray,
    nxt: np.ndarray,
    pk: np.ndarray,
    pc: np.ndarray,
    row_of_slot: np.ndarray,
    scale: float,
    out: np.ndarray,
    by_word: bool = False,
) -> None:
    """Densify part of a :class:`MultinomialStats` pool: ``out[row_of_slot[k], j] = n_k,words[j]``
    (true units; ``out[j, row_of_slot[k]]`` with ``by_word``) for the slots ``k`` with a row
    (``row_of_slot[k] ≥ 0``), walking only the postings of ``words``. ``out`` starts at zero."""
    nv = head.shape[0]
    n_slots = row_of_slot.shape[0]
    for j in range(words.shape[0]):
        w = words[j]
        if w < 0 or w >= nv:
            continue
        e = head[w]
        while e >= 0:
            k = pk[e]
            if k < n_slots and row_of_slot[k] >= 0 and pc[e] > 0.0:
                if by_word:
                    out[j, row_of_slot[k]] += pc[e] * scale
                else:
                    out[row_of_slot[k], j] += pc[e] * scale
            e = nxt[e]


@njit(cache=True)
def gather_indexed(
    words: np.ndarray,
    topic_words: np.ndarray,
    head: np.ndarray,
    nxt: np.ndarray,
    pk: np.ndarray,
    pc: np.ndarray,
    topic_of_slot: np.ndarray,
    cat_of_slot: np.ndarray,
    scale: float,
    word_tokens: np.ndarray,
    nlw: np.ndarray,
    okl: np.ndarray,
) -> tuple[np.ndarray, ...]:
    """Densify a batch's counts from the pool and index them in one walk of the postings of
    its words and of the topic entries (layout: :mod:`noveld.models.kernels.hdp_scores`):
    ``nlw[j, y] = n_{y, words[j]}`` with each word's topics (room for ``word_tokens[j]`` more:
    a token adds at most one), and ``okl[k, y] = O_ky`` with each category's topics and each
    topic's categories. ``topic_of_slot`` / ``cat_of_slot`` map pool slots to topic numbers /
    local categories (−1: neither); ``nlw`` and ``okl`` start at zero."""
    cap, n_topics = okl.shape
    n_words = words.shape[0]
    nv = head.shape[0]
    n_slots = topic_of_slot.shape[0]
    wzlen = np.zeros(n_words, dtype=np.int64)
    for j in range(n_words):
        w = words[j]
        e = head[w] if 0 <= w < nv else -1
        while e >= 0:
            k = pk[e]
            if k < n_slots and topic_of_slot[k] >= 0 and pc[e] > 0.0:
                if nlw[j, topic_of_slot[k]] == 0.0:
                    wzlen[j] += 1
                nlw[j, topic_of_slot[k]] += pc[e] * scale
            e = nxt[e]
    wz_ptr = np.zeros(n_words + 1, dtype=np.int64)
    for j in range(n_words):
        wz_ptr[j + 1] = wz_ptr[j] + wzlen[j] + word_tokens[j] + 1
    wz = np.zeros(wz_ptr[n_words], dtype=np.int64)
    for j in range(n_words):
        q = wz_ptr[j]
        for y in range(n_topics):
            if nlw[j, y] > 0.0:
                wz[q] = y
                q += 1
    nz = np.zeros((cap, n_topics), dtype=np.int64)
    nzlen = np.zeros(cap, dtype=np.int64)
    innz = np.zeros((cap, n_topics), dtype=np.bool_)
    cz = np.zeros((n_topics, cap), dtype=np.int64)
    czlen = np.zeros(n_topics, dtype=np.int64)
    for y in range(topic_words.shape[0]):
        w = topic_words[y]
        e = head[w] if 0 <= w < nv else -1
        while e >= 0:
            k = pk[e]
            if k < n_slots and cat_of_slot[k] >= 0 and pc[e] > 0.0:
                r = cat_of_slot[k]
                okl[r, y] += pc[e] * scale
                if not innz[r, y]:
                    innz[r, y] = True
                    nz[r, nzlen[r]] = y
                    nzlen[r] += 1
                    cz[y, czlen[y]] = r
                    czlen[y] += 1
            e = nxt[e]
    return nz, nzlen, innz, cz, czlen, wz, wz_ptr, wzlen
