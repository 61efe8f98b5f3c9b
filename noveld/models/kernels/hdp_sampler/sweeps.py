"""The per-batch Chinese-restaurant-franchise sampler of the category/topic HDP (LBPL-NTM,
paper 000 §3.3, Algorithm 1, restricted to one mini-batch; DESIGN §5.3).

Earlier batches are fixed and enter through their counts; the batch's own variables — each
word's table ``t`` and topic ``y``, each table's category ``k`` — are seated once and then
swept. The counts and sparse indexes (bundles ``tw``, ``cat``, ``ix`` and ``ctl``) are described
in :mod:`noveld.models.kernels.hdp_scores`; they make every step cost what a word or a category
actually uses, not the number of topics L.

Conditionals (paper 000):

- eq. 4/5 ``f(y | θ_k) = (ζ + O_ky) / (Lζ + O_k)``; a new category has ``1/L``;
- eq. 3 (table of a word, its topic known) ``∝ s_t f(y | θ_{k_t})``, new table
  ``∝ α G(y)``, ``G(y) = (Σ_k m_k f(y|θ_k) + γ/L) / (M + γ)``; a new table's category by
  eq. 6 for that word;
- eq. 6 (category of a table) ``∝ m_k Π_n f(y_n | θ_k)`` sequentially, new ``∝ γ Π f(y_n|θ_new)``;
- eq. 7 (topic of a word) ``∝ f(l | θ_{k_t}) (β + n_lw) / (Vβ + n_l)``.

Two departures, both needed for short texts in a stream (docs/model.md):

1. *Words have no topic when their document is first seated*, so the first pass seats a
   document at one table whose category is chosen by eq. 6 with the topics summed out word by
   word (:func:`~noveld.models.kernels.hdp_scores.block_log_predictive`), then draws each word's
   topic by eq. 7. With ``blocked`` the k-step of the sweeps is the same move (a table's
   category and topics together); otherwise it is eq. 6 given the topics.
2. *MAP over exchangeable topics*: unused topics are interchangeable, so in MAP mode they
   compete as one class (their summed weight) against each used topic, as a sampler would see
   them; when the class wins the lowest-numbered unused topic is taken.
"""

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
from noveld.models.kernels.hdp_scores.topics import (
    CATS,
    EMPTY_BELOW,
    FIRST_EMPTY,
    N_EMPTY,
    NEXT_UID,
    OVERFLOW,
    Arrays,
    choose_block_category,
    context_log_likelihood,
    draw_topic,
    pick,
    pick_log,
)


def uniforms_needed(n_tokens: int, n_docs: int, n_sweeps: int) -> int:
    """Uniforms :func:`sample_batch` may draw: per pass one per document and at most five per
    token (table, a new table's category, topic, the table's category, a blocked topic)."""
    return (5 * n_tokens + n_docs) * (n_sweeps + 1)


@njit(cache=True)
def _open_category(ctl: np.ndarray, cat: Arrays) -> int:
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


@njit(cache=True)
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


@njit(cache=True)
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


@njit(cache=True)
def _word_table(
    i: int, d: int, lo: int, hi: int, zeta: float, alpha: float, gamma: float, cat: Arrays,
    ctl: np.ndarray, tok_t: np.ndarray, tok_y: np.ndarray, tabs: Arrays, scratch: np.ndarray,
    wts: np.ndarray, u1: float, u2: float, deterministic: bool, n_tab: int, discount: float,
) -> tuple[int, int]:  # fmt: skip
    """Eq. 3 for token i (taken out, its topic known) of the document spanning ``lo:hi``:
    one of the document's open tables, or a new one whose category is drawn by eq. 6 for this
    word. Returns (table, tables used); table −1 when out of category capacity."""
    okl, ok, mk, alive = cat[0], cat[1], cat[2], cat[3]
    tab_doc, tab_k, tab_size = tabs
    n_topics = okl.shape[1]
    y = tok_y[i]
    n_open = 0
    for j in range(lo, hi):
        tj = tok_t[j]
        if j == i or tab_size[tj] <= 0:
            continue
        seen = False
        for q in range(n_open):
            seen = seen or scratch[q] == tj
        if not seen:
            scratch[n_open] = tj
            n_open += 1
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
        kc = _open_category(ctl, cat)
        if kc < 0:
            return -1, n_tab
    tab_doc[n_tab] = d
    tab_k[n_tab] = kc
    tab_size[n_tab] = 0
    mk[kc] += 1.0
    return n_tab, n_tab + 1


@njit(cache=True)
def _has_context(d: int, cx: Arrays) -> bool:
    """Whether document d has context fields."""
    return bool(cx[0][d + 1] > cx[0][d])


@njit(cache=True)
def _context_weights(
    d: int, kmax: int, eta: float, cx: Arrays, extra: np.ndarray, none: np.ndarray
) -> np.ndarray:
    """Document d's context log likelihood under each category and a new one, or ``none``
    (zeros) when it has no context."""
    if not _has_context(d, cx):
        return none
    for k in range(kmax):
        extra[k] = context_log_likelihood(d, k, eta, cx)
    extra[kmax] = context_log_likelihood(d, -1, eta, cx)
    return extra


@njit(cache=True)
def _move_context(d: int, k: int, s: float, cx: Arrays) -> None:
    """Add (s = 1) or remove (s = −1) document d's context observations in category k."""
    ctx_ptr, col_v, col_f, cvk = cx[0], cx[1], cx[2], cx[4]
    for j in range(ctx_ptr[d], ctx_ptr[d + 1]):
        cvk[k, col_v[j]] += s
        cvk[k, col_f[j]] += s


@njit(cache=True)
def _seat_document(
    d: int, lo: int, hi: int, tok_word: np.ndarray, known: np.ndarray, zeta: float,
    beta: float, vbeta: float, gamma: float, tw: Arrays, cat: Arrays, ix: Arrays,
    ctl: np.ndarray, tok_t: np.ndarray, tok_y: np.ndarray, tabs: Arrays, scratch: Arrays,
    ws: np.ndarray, wts: np.ndarray, rng_u: np.ndarray, ui: int, deterministic: bool,
    n_tab: int, log_pred: np.ndarray, eta: float, cx: Arrays, extra: Arrays, discount: float,
) -> tuple[int, int]:  # fmt: skip
    """First pass for document d: one table, its category by eq. 6 with the topics summed out
    (fixed for a known document), then each word's topic by eq. 7. An unlabelled document's
    log predictive given everything seated before it goes to ``log_pred[d]`` (eqs. 2 and 6:
    ``log [Σ_k m_k p(d|k) + γ p(d|new)] − log(M + γ)``, with its context when it has one). The
    table carries the document's context (``cx[5][d]``). Returns (tables used, next uniform);
    tables used −1 when out of category capacity."""
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
        weights = _context_weights(d, kmax, eta, cx, extra[0], extra[1])
        kc = choose_block_category(ws[:n], zeta, beta, vbeta, gamma, tw, cat, ix, ctl, kmax,
                                   scratch, wts, rng_u[ui], deterministic, total, weights,
                                   _has_context(d, cx), discount)  # fmt: skip
        log_pred[d] = total[0] - math.log(mk[:kmax].sum() + gamma)
        if kc == kmax:
            kc = _open_category(ctl, cat)
            if kc < 0:
                return -1, ui
    ui += 1
    t = n_tab
    tab_doc[t] = d
    tab_k[t] = kc
    tab_size[t] = n
    mk[kc] += 1.0
    cx[5][d] = t
    _move_context(d, kc, 1.0, cx)
    for i in range(lo, hi):
        w = tok_word[i]
        y = draw_topic(w, kc, zeta, beta, tw, cat, ix, ctl, wts, rng_u[ui], deterministic)
        ui += 1
        tok_t[i] = t
        tok_y[i] = y
        move_token(w, y, kc, 1.0, vbeta, tw, cat, ix, ctl)
    return n_tab + 1, ui


@njit(cache=True)
def _table_category(
    t: int, lo: int, hi: int, tok_word: np.ndarray, zeta: float, beta: float, vbeta: float,
    gamma: float, blocked: bool, tw: Arrays, cat: Arrays, ix: Arrays, ctl: np.ndarray,
    tok_t: np.ndarray, tok_y: np.ndarray, tabs: Arrays, scratch: Arrays, ws: np.ndarray,
    ys: np.ndarray, idx: np.ndarray, wts: np.ndarray, rng_u: np.ndarray, ui: int,
    deterministic: bool, d: int, eta: float, cx: Arrays, extra: Arrays, discount: float,
) -> int:  # fmt: skip
    """The k-step for open table t of document d, spanning ``lo:hi``: take the table out,
    draw its category — eq. 6 given its topics, or with ``blocked`` the category and topics
    together; times the document's context likelihood when t carries it — and put it back.
    Returns the next uniform (−1: out of category capacity)."""
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
        _move_context(d, tab_k[t], -1.0, cx)
        weights = _context_weights(d, kmax, eta, cx, extra[0], extra[1])
    if blocked:
        kc = choose_block_category(ws[:n], zeta, beta, vbeta, gamma, tw, cat, ix, ctl, kmax,
                                   scratch, wts, rng_u[ui], deterministic, np.empty(1), weights,
                                   carries and _has_context(d, cx), discount)  # fmt: skip
    else:
        okl, ok, alive = cat[0], cat[1], cat[3]
        wts[kmax] = table_category_logweights(ys[:n], okl, ok, mk, alive, kmax, zeta, gamma, wts,
                                              discount)  # fmt: skip
        for k in range(kmax + 1):
            wts[k] += weights[k]
        kc = pick_log(wts, kmax + 1, rng_u[ui], deterministic)
    ui += 1
    if kc == kmax:
        kc = _open_category(ctl, cat)
        if kc < 0:
            return -1
    tab_k[t] = kc
    mk[kc] += 1.0
    if carries:
        _move_context(d, kc, 1.0, cx)
    for q in range(n):
        i = idx[q]
        if blocked:
            tok_y[i] = draw_topic(ws[q], kc, zeta, beta, tw, cat, ix, ctl, wts, rng_u[ui],
                                  deterministic)  # fmt: skip
            ui += 1
        move_token(ws[q], tok_y[i], kc, 1.0, vbeta, tw, cat, ix, ctl)
    return ui


@njit(cache=True)
def sample_batch(
    doc_ptr: np.ndarray,
    tok_word: np.ndarray,
    known: np.ndarray,
    n_sweeps: int,
    first_sweep: int,
    rng_u: np.ndarray,
    deterministic: bool,
    blocked: bool,
    beta: float,
    vbeta: float,
    zeta: float,
    alpha: float,
    gamma: float,
    tw: Arrays,
    cat: Arrays,
    ix: Arrays,
    ctl: np.ndarray,
    tok_y: np.ndarray,
    tok_t: np.ndarray,
    tabs: Arrays,
    n_tab: int,
    log_pred: np.ndarray,
    eta: float,
    cx: Arrays,
    discount: float = 0.0,
) -> int:
    """Seat a batch (``first_sweep == 0``) and/or run Gibbs sweeps ``max(first_sweep, 1) ..
    n_sweeps`` over its variables: per word its table (eq. 3) and topic (eq. 7), then per table
    its category (eq. 6). Returns the number of tables used (−1: out of category capacity;
    rerun with more room).

    Document d's tokens are ``tok_word[doc_ptr[d]:doc_ptr[d+1]]`` (batch-local word ids, one
    entry per token); ``known[d] ≥ 0`` is its fixed category (all its words at one table).
    ``tabs = (tab_doc, tab_k, tab_size)``. Local categories must be ordered by uid, so that MAP
    ties go to the oldest. ``rng_u`` holds :func:`uniforms_needed` uniforms; pass ``s`` uses
    the ``s``-th share, so one call may stop after the seating and another continue with new
    α or γ. The seating writes each unlabelled document's log predictive to ``log_pred[d]``.
    Context (``cx = (ctx_ptr, value column, field column, U, counts[k, column], context
    table)``, prior ``eta``) enters the category choice of the table carrying it. A Pitman–Yor
    ``discount`` d puts ``m_k − d`` and ``γ + d·K`` in place of eq. 2's ``m_k`` and ``γ``.
    """
    okl = cat[0]
    n_docs = doc_ptr.shape[0] - 1
    n_tok = tok_word.shape[0]
    tab_size = tabs[2]
    max_len = 1
    for d in range(n_docs):
        max_len = max(max_len, doc_ptr[d + 1] - doc_ptr[d])
    wts = np.empty(max(okl.shape[1], okl.shape[0]) + 1)
    scratch = (
        np.empty(max_len), np.empty(max_len, dtype=np.int64), np.empty(max_len, dtype=np.int64),
        np.empty(max_len, dtype=np.int64), np.empty(max_len), np.empty(max_len),
        np.empty((okl.shape[0], 2 * max_len)), np.empty(okl.shape[0] + 1, dtype=np.int64),
    )  # fmt: skip
    ws = np.empty(max_len, dtype=np.int64)
    ys = np.empty(max_len, dtype=np.int64)
    idx = np.empty(max_len, dtype=np.int64)
    open_tabs = np.empty(max_len, dtype=np.int64)
    per_pass = 5 * n_tok + n_docs
    inv, inv_sum = tw[2], tw[3]
    extra = (np.empty(okl.shape[0] + 1), np.zeros(okl.shape[0] + 1))
    for sweep in range(first_sweep, n_sweeps + 1):
        ui = per_pass * sweep
        for d in range(n_docs):
            lo, hi = doc_ptr[d], doc_ptr[d + 1]
            inv_sum[0] = inv.sum()  # exact again at every document (incremental in between)
            if sweep == 0:
                n_tab, ui = _seat_document(
                    d, lo, hi, tok_word, known, zeta, beta, vbeta, gamma, tw, cat, ix, ctl,
                    tok_t, tok_y, tabs, scratch, ws, wts, rng_u, ui, deterministic, n_tab,
                    log_pred, eta, cx, extra, discount,
                )  # fmt: skip
                if n_tab < 0:
                    return -1
                continue
            ui += 1
            for i in range(lo, hi):
                w = tok_word[i]
                t = tok_t[i]
                move_token(w, tok_y[i], tabs[1][t], -1.0, vbeta, tw, cat, ix, ctl)
                tab_size[t] -= 1
                if known[d] < 0:
                    left = t if tab_size[t] == 0 else -1  # the token's table emptied
                    if left >= 0:
                        cat[2][tabs[1][t]] -= 1.0
                    t, n_tab = _word_table(
                        i, d, lo, hi, zeta, alpha, gamma, cat, ctl, tok_t, tok_y, tabs,
                        open_tabs, wts, rng_u[ui], rng_u[ui + 1], deterministic, n_tab,
                        discount,
                    )  # fmt: skip
                    if t < 0:
                        return -1
                    if left >= 0 and t != left and cx[5][d] == left:
                        # the document's context leaves the emptied table with its last token
                        _move_context(d, tabs[1][left], -1.0, cx)
                        _move_context(d, tabs[1][t], 1.0, cx)
                        cx[5][d] = t
                ui += 2
                y = draw_topic(w, tabs[1][t], zeta, beta, tw, cat, ix, ctl, wts, rng_u[ui],
                               deterministic)  # fmt: skip  # eq. 7
                ui += 1
                tok_t[i] = t
                tok_y[i] = y
                tab_size[t] += 1
                move_token(w, y, tabs[1][t], 1.0, vbeta, tw, cat, ix, ctl)
            if known[d] >= 0:
                continue
            for t in range(n_tab):
                if tabs[0][t] != d or tab_size[t] <= 0:
                    continue
                ui = _table_category(
                    t, lo, hi, tok_word, zeta, beta, vbeta, gamma, blocked, tw, cat, ix, ctl,
                    tok_t, tok_y, tabs, scratch, ws, ys, idx, wts, rng_u, ui, deterministic, d,
                    eta, cx, extra, discount,
                )  # fmt: skip
                if ui < 0:
                    return -1
    return n_tab


@njit(cache=True)
def reseat_member(
    ws: np.ndarray, k: int, zeta: float, beta: float, vbeta: float, gamma: float, tw: Arrays,
    cat: Arrays, ix: Arrays, ctl: np.ndarray, discount: float = 0.0,
) -> int:  # fmt: skip
    """Take a member document (batch-local word ids ``ws``, one per token) out of category
    ``k`` and return the category its first pass would choose now (MAP, no context): ``k``,
    another local category, or ``ctl[CATS]`` for a new one. Modifies the bundles.

    Its topics are not stored, so each token leaves the topic of ``k`` most likely to hold it
    (largest ``O_kl n_lw``, holding at least a whole token of both); a token ``k`` does not
    hold stays. Its table leaves ``m_k``. Then eq. 6 with the topics summed out, as in the
    first pass (:func:`choose_block_category`)."""
    nlw = tw[0]
    okl = cat[0]
    mk = cat[2]
    nz, nzlen = ix[0], ix[1]
    n = ws.shape[0]
    for i in range(n):
        w = ws[i]
        best, best_v = -1, 0.0
        for q in range(nzlen[k]):
            y = nz[k, q]
            if okl[k, y] >= 1.0 and nlw[w, y] >= 1.0:
                v = okl[k, y] * nlw[w, y]
                if v > best_v or (v == best_v and y < best):
                    best, best_v = y, v
        if best >= 0:
            move_token(w, best, k, -1.0, vbeta, tw, cat, ix, ctl)
    mk[k] = max(mk[k] - 1.0, 0.0)
    kmax = ctl[CATS]
    m = max(n, 1)
    scratch = (
        np.empty(m), np.empty(m, dtype=np.int64), np.empty(m, dtype=np.int64),
        np.empty(m, dtype=np.int64), np.empty(m), np.empty(m),
        np.empty((okl.shape[0], 2 * m)), np.empty(okl.shape[0] + 1, dtype=np.int64),
    )  # fmt: skip
    logw = np.empty(max(okl.shape[1], okl.shape[0]) + 1)
    total = np.empty(1)
    extra = np.zeros(okl.shape[0] + 1)
    return choose_block_category(ws, zeta, beta, vbeta, gamma, tw, cat, ix, ctl, kmax, scratch,
                                 logw, 0.0, True, total, extra, False, discount)  # fmt: skip
