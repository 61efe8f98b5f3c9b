"""The Gibbs steps of the hdp batch sampler: a word's table (eq. 3), a document's first-pass
seating, and a table's category (eq. 6, or blocked with its topics)."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from noveld.models.kernels.hdp import (
    f_topic,
    new_category_weight,
    table_category_logweights,
    table_weight,
)
from noveld.models.kernels.hdp_sampler.counts import (
    context_weights,
    has_context,
    move_context,
    move_token,
    open_category,
)
from noveld.models.kernels.hdp_scores.categories import choose_block_category
from noveld.models.kernels.hdp_scores.topics import CATS, Arrays, draw_topic, pick, pick_log
from noveld.models.kernels.tempering import document_tempering


@njit(cache=True, inline="always")
def new_table_weight(
    y: int, zeta: float, gamma: float, cat: Arrays, kmax: int, discount: float = 0.0
) -> float:
    """``G(y)``: topic y's predictive at a new table, its category integrated out (eqs. 2, 4, 5):
    ``(Σ_k m_k f(y|θ_k) + γ/L) / (M + γ)``; with a Pitman–Yor ``discount`` d the weights are
    ``m_k − d`` and ``γ + d·K``, normalised by their sum."""
    okl, ok, mk, alive = cat[0], cat[1], cat[2], cat[3]
    n_topics = okl.shape[1]
    new_w = new_category_weight(gamma, discount, mk, alive, kmax)
    num = new_w * f_topic(-1, y, okl, ok, zeta, n_topics)
    den = new_w
    for k in range(kmax):
        if alive[k] and mk[k] > 0.0:
            wk = table_weight(mk[k], discount)
            num += wk * f_topic(k, y, okl, ok, zeta, n_topics)
            den += wk
    return num / den


@njit(cache=True, inline="always")
def open_tables(
    d: int, i: int, t_old: int, lo: int, hi: int, tok_t: np.ndarray, tabs: Arrays,
    doc_tabs: np.ndarray, n_doc_tabs: int, tab_first: np.ndarray, out: np.ndarray,
) -> int:  # fmt: skip
    """The open tables of document d (its tables ``doc_tabs[:n_doc_tabs]``) without token i,
    taken out of table ``t_old``, into ``out`` in order of their first token — the order a scan
    of the document's other tokens meets them. ``tab_first[t]`` is the first token at t; it
    moves past i here when i was t_old's first (a scan only then). Returns their number."""
    tab_size = tabs[2]
    if tab_first[t_old] == i:
        nxt = hi
        for j in range(i + 1, hi):
            if tok_t[j] == t_old:
                nxt = j
                break
        tab_first[t_old] = nxt
    n_open = 0
    for q in range(n_doc_tabs):
        t = doc_tabs[q]
        if tab_size[t] <= 0:
            continue
        p = n_open  # insertion by first token (a document has few tables)
        while p > 0 and tab_first[out[p - 1]] > tab_first[t]:
            out[p] = out[p - 1]
            p -= 1
        out[p] = t
        n_open += 1
    return n_open


@njit(cache=True, inline="always")
def word_table(
    i: int, d: int, n_open: int, zeta: float, alpha: float, gamma: float, cat: Arrays,
    ctl: np.ndarray, tok_y: np.ndarray, tabs: Arrays, scratch: np.ndarray,
    wts: np.ndarray, u1: float, u2: float, deterministic: bool, n_tab: int, discount: float,
) -> tuple[int, int]:  # fmt: skip
    """Eq. 3 for token i (taken out, its topic known) of document d: one of the document's
    open tables ``scratch[:n_open]`` (:func:`open_tables`), or a new one whose category is
    drawn by eq. 6 for this word. Returns (table, tables used); table −1 when out of category
    capacity."""
    okl, ok, mk, alive = cat[0], cat[1], cat[2], cat[3]
    tab_doc, tab_k, tab_size = tabs
    n_topics = okl.shape[1]
    y = tok_y[i]
    best = 0.0
    for q in range(n_open):
        kq = tab_k[scratch[q]]
        wts[q] = tab_size[scratch[q]] * f_topic(kq, y, okl, ok, zeta, n_topics)
        best = max(best, wts[q])
    if deterministic and alpha <= best:  # G(y) ≤ 1: a new table cannot win, skip its O(K)
        wts[n_open] = 0.0
    else:
        wts[n_open] = alpha * new_table_weight(y, zeta, gamma, cat, ctl[CATS], discount)
    c = pick(wts, n_open + 1, u1, deterministic)
    if c < n_open:
        return scratch[c], n_tab
    kmax = ctl[CATS]
    for k in range(kmax):
        live = alive[k] and mk[k] > 0.0
        wk = table_weight(mk[k], discount)
        wts[k] = wk * f_topic(k, y, okl, ok, zeta, n_topics) if live else 0.0
    new_w = new_category_weight(gamma, discount, mk, alive, kmax)
    wts[kmax] = new_w * f_topic(-1, y, okl, ok, zeta, n_topics)
    kc = pick(wts, kmax + 1, u2, deterministic)
    if kc == kmax:
        kc = open_category(ctl, cat)
        if kc < 0:
            return -1, n_tab
    tab_doc[n_tab] = d
    tab_k[n_tab] = kc
    tab_size[n_tab] = 0
    mk[kc] += 1.0
    return n_tab, n_tab + 1


@njit(cache=True)
def seat_document(
    d: int, lo: int, hi: int, tok_word: np.ndarray, known: np.ndarray, zeta: float,
    beta: float, vbeta: float, gamma: float, tw: Arrays, cat: Arrays, ix: Arrays,
    ctl: np.ndarray, tok_t: np.ndarray, tok_y: np.ndarray, tabs: Arrays, scratch: Arrays,
    ws: np.ndarray, wts: np.ndarray, rng_u: np.ndarray, ui: int, deterministic: bool,
    n_tab: int, log_pred: np.ndarray, eta: float, cx: Arrays, extra: Arrays, discount: float,
    concentration: float = 0.0,
) -> tuple[int, int]:  # fmt: skip
    """First pass for document d: one table, its category by eq. 6 with the topics summed out
    (fixed for a known document), then each word's topic by eq. 7. An unlabelled document's
    log predictive given everything seated before it goes to ``log_pred[d]`` (eqs. 2 and 6:
    ``log [Σ_k m_k p(d|k) + γ p(d|new)] − log(M + γ)``, with its context when it has one). The
    table carries the document's context (``cx[5][d]``). Returns (tables used, next uniform);
    tables used −1 when out of category capacity. ``concentration`` (s > 0) tempers the
    table's words by their number (:func:`~noveld.models.kernels.tempering.document_tempering`)."""
    tab_doc, tab_k, tab_size = tabs
    mk = cat[2]
    n = hi - lo
    for i in range(n):
        ws[i] = tok_word[lo + i]
    if known[d] >= 0:
        kc = known[d]
    else:
        kmax = ctl[CATS]
        total = np.empty(1)
        weights = context_weights(d, kmax, eta, cx, extra[0], extra[1])
        kc = choose_block_category(ws[:n], zeta, beta, vbeta, gamma, tw, cat, ix, ctl, kmax,
                                   scratch, wts, rng_u[ui], deterministic, total, weights,
                                   has_context(d, cx), discount,
                                   document_tempering(n, concentration))  # fmt: skip
        log_pred[d] = total[0] - math.log(mk[:kmax].sum() + gamma)
        if kc == kmax:
            kc = open_category(ctl, cat)
            if kc < 0:
                return -1, ui
    ui += 1
    t = n_tab
    tab_doc[t] = d
    tab_k[t] = kc
    tab_size[t] = n
    mk[kc] += 1.0
    cx[5][d] = t
    move_context(d, kc, 1.0, cx)
    for i in range(lo, hi):
        w = tok_word[i]
        y = draw_topic(w, kc, zeta, beta, tw, cat, ix, ctl, wts, rng_u[ui], deterministic)
        ui += 1
        tok_t[i] = t
        tok_y[i] = y
        move_token(w, y, kc, 1.0, vbeta, tw, cat, ix, ctl)
    return n_tab + 1, ui


@njit(cache=True)
def table_category(
    t: int, lo: int, hi: int, tok_word: np.ndarray, zeta: float, beta: float, vbeta: float,
    gamma: float, blocked: bool, tw: Arrays, cat: Arrays, ix: Arrays, ctl: np.ndarray,
    tok_t: np.ndarray, tok_y: np.ndarray, tabs: Arrays, scratch: Arrays, ws: np.ndarray,
    ys: np.ndarray, idx: np.ndarray, wts: np.ndarray, rng_u: np.ndarray, ui: int,
    deterministic: bool, d: int, eta: float, cx: Arrays, extra: Arrays, discount: float,
    concentration: float = 0.0,
) -> int:  # fmt: skip
    """The k-step for open table t of document d, spanning ``lo:hi``: take the table out,
    draw its category — eq. 6 given its topics, or with ``blocked`` the category and topics
    together; times the document's context likelihood when t carries it — and put it back.
    Returns the next uniform (−1: out of category capacity). ``concentration`` tempers the
    table's words by their number, as in :func:`seat_document`."""
    tab_k = tabs[1]
    mk = cat[2]
    n = 0
    for i in range(lo, hi):
        if tok_t[i] == t:
            idx[n] = i
            ws[n] = tok_word[i]
            ys[n] = tok_y[i]
            n += 1
            move_token(tok_word[i], tok_y[i], tab_k[t], -1.0, vbeta, tw, cat, ix, ctl)
    mk[tab_k[t]] -= 1.0
    kmax = ctl[CATS]
    weights = extra[1]
    carries = cx[5][d] == t  # this table carries the document's context
    if carries:
        move_context(d, tab_k[t], -1.0, cx)
        weights = context_weights(d, kmax, eta, cx, extra[0], extra[1])
    tau = document_tempering(n, concentration)
    if blocked:
        kc = choose_block_category(ws[:n], zeta, beta, vbeta, gamma, tw, cat, ix, ctl, kmax,
                                   scratch, wts, rng_u[ui], deterministic, np.empty(1), weights,
                                   carries and has_context(d, cx), discount, tau)  # fmt: skip
    else:
        okl, ok, alive = cat[0], cat[1], cat[3]
        wts[kmax] = table_category_logweights(ys[:n], okl, ok, mk, alive, kmax, zeta, gamma, wts,
                                              discount, tau)  # fmt: skip
        for k in range(kmax + 1):
            wts[k] += weights[k]
        kc = pick_log(wts, kmax + 1, rng_u[ui], deterministic)
    ui += 1
    if kc == kmax:
        kc = open_category(ctl, cat)
        if kc < 0:
            return -1
    tab_k[t] = kc
    mk[kc] += 1.0
    if carries:
        move_context(d, kc, 1.0, cx)
    for q in range(n):
        i = idx[q]
        if blocked:
            tok_y[i] = draw_topic(ws[q], kc, zeta, beta, tw, cat, ix, ctl, wts, rng_u[ui],
                                  deterministic)  # fmt: skip
            ui += 1
        move_token(ws[q], tok_y[i], kc, 1.0, vbeta, tw, cat, ix, ctl)
    return ui
