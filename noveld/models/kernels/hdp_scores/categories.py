"""Eq. 6 for a table of words with their topics summed out: the category choice of the first
pass, exact where it matters, with the cheap upper bounds that prune the rest under MAP."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from noveld.models.kernels.hdp import new_category_weight, table_weight
from noveld.models.kernels.hdp_scores.blocks import block_log_predictive, earlier_occurrences
from noveld.models.kernels.hdp_scores.topics import (
    N_EMPTY,
    Arrays,
    best_used_topic,
    list_unused,
    phi,
    phi_sum,
    pick_log,
)


@njit(cache=True)
def block_scratch(m: int, n_cats: int) -> Arrays:
    """The ``scratch`` of :func:`choose_block_category` for tables of up to ``m`` words and up to
    ``n_cats`` categories."""
    return (
        np.empty(m), np.empty(m, dtype=np.int64), np.empty(m, dtype=np.int64),
        np.empty(m, dtype=np.int64), np.empty(m), np.empty(m), np.empty((n_cats, 2 * m)),
        np.empty(n_cats + 1, dtype=np.int64), np.empty(m), np.empty(m),
    )  # fmt: skip


@njit(cache=True)
def choose_block_category(
    ws: np.ndarray, zeta: float, beta: float, vbeta: float, gamma: float, tw: Arrays,
    cat: Arrays, ix: Arrays, ctl: np.ndarray, kmax: int, scratch: Arrays, logw: np.ndarray,
    u: float, deterministic: bool, log_total: np.ndarray, extra: np.ndarray, has_extra: bool,
    discount: float = 0.0, tau: float = 1.0,
) -> int:  # fmt: skip
    """Eq. 6 for a table of words ``ws`` with their topics summed out
    (:func:`block_log_predictive`): a local category, or ``kmax`` for a new one. Category
    weights ``m_k − d`` and ``γ + d·K`` under a Pitman–Yor ``discount`` d (``m_k``, ``γ`` for
    d = 0). ``extra[k]``
    (``extra[kmax]`` for a new category) is added to each log weight: the document's context
    likelihood, or zeros (``has_extra`` false: nothing to add, and the bounds may use the new
    category's score as a floor). ``tau`` < 1 raises the words' predictive to that power, the
    category weights untouched (the length tempering of
    :func:`~noveld.models.kernels.tempering.document_tempering`).

    MAP scores every category by :func:`upper_bound_log_predictive` first and exactly only
    those whose bound reaches the best exact score so far (the result is the exact argmax,
    ties to the oldest); sampling scores all exactly. ``log_total[0]`` receives
    ``log Σ_k m_k p(ws|k) + γ p(ws|new)`` — exact for the categories scored exactly; the others
    enter with their bound, or not at all when even that is below the new category's weight
    (so it is within log(K + 1) of the truth, and in practice the pruned terms are many nats
    below the best)."""
    phi_sums, best_used, empties, own_t, own_c, phi_top, acc, touched, same, phi_e = scratch
    nlw, nl, inv, _ = tw
    mk, alive = cat[2], cat[3]
    wz, wz_ptr, wzlen = ix[5], ix[6], ix[7]
    n = ws.shape[0]
    n_empty = ctl[N_EMPTY]
    for i in range(n):
        phi_sums[i] = phi_sum(ws[i], tw, ix, beta)
        best_used[i] = best_used_topic(ws[i], tw, ix, beta, n_empty)
    n_empty = list_unused(ctl, nl, n, empties)
    earlier_occurrences(ws, same)
    args = (zeta, beta, tw, cat, ix, phi_sums, best_used, empties, n_empty, own_t, own_c, vbeta,
            same)  # fmt: skip
    new_w = new_category_weight(gamma, discount, mk, alive, kmax)
    logw[kmax] = math.log(new_w) + tau * block_log_predictive(ws, -1, *args) + extra[kmax]
    if not deterministic:
        for k in range(kmax):
            live = alive[k] and mk[k] > 0.0
            lw = math.log(table_weight(mk[k], discount)) + tau * block_log_predictive(ws, k, *args)
            lw += extra[k]
            logw[k] = lw if live else -np.inf
        log_total[0] = _log_sum_exp(logw, kmax + 1)
        return pick_log(logw, kmax + 1, u, False)
    outside = 0.0  # the most a topic outside a category can weigh for a word, own counts aside
    for i in range(n):  # max_l φ_l(w_i): a topic holding w_i, or else at most β/(Vβ)
        w = ws[i]
        top = beta / vbeta * (1.0 + 1e-9)
        for q in range(wz_ptr[w], wz_ptr[w] + wzlen[w]):
            top = max(top, phi(w, wz[q], nlw, inv, beta))
        phi_top[i] = top
        outside = max(outside, zeta * top)
        for j in range(min(n, n_empty)):  # the unused class, with the topics it may claim
            outside = max(outside, n_empty * zeta * phi(w, empties[j], nlw, inv, beta))
        phi_e[i] = phi(w, empties[0], nlw, inv, beta) if n_empty > 0 else -1.0
    # below this floor a category's words cannot reach the new category's exact score, whatever
    # its extra term (at most the largest): no logarithm for it
    floor = logw[kmax] - 1e-9
    if has_extra:
        top_extra = -np.inf
        for k in range(kmax):
            top_extra = max(top_extra, extra[k])
        floor -= top_extra
    upper_bound_log_predictive(ws, zeta, beta, tw, cat, ix, kmax, phi_sums, phi_top,
                               outside * (1.0 + 1e-9), acc, logw, floor, touched,
                               discount, tau, same, phi_e, vbeta,
                               empties[0] if n_empty > 0 else -1)  # fmt: skip
    if has_extra:
        for k in range(kmax):
            logw[k] += extra[k]
    best, best_v = kmax, logw[kmax]
    first = -1
    for k in range(kmax):
        if first < 0 or logw[k] > logw[first]:
            first = k
    for q in range(-1, kmax):
        k = first if q < 0 else q
        if k < 0 or (q >= 0 and k == first) or logw[k] < best_v:
            continue
        v = math.log(table_weight(mk[k], discount)) + tau * block_log_predictive(ws, k, *args)
        v += extra[k]
        logw[k] = v
        if v > best_v or (v == best_v and k < best):
            best, best_v = k, v
    log_total[0] = _log_sum_exp(logw, kmax + 1)
    return best


@njit(cache=True)
def _log_sum_exp(x: np.ndarray, n: int) -> float:
    top = -np.inf
    for i in range(n):
        top = max(top, x[i])
    if top == -np.inf:
        return top
    acc = 0.0
    for i in range(n):
        if x[i] > top - 40.0:  # smaller terms change the sum by < 1e-17 relative
            acc += math.exp(x[i] - top)
    return top + math.log(acc)


@njit(cache=True)
def upper_bound_log_predictive(
    ws: np.ndarray, zeta: float, beta: float, tw: Arrays, cat: Arrays, ix: Arrays, kmax: int,
    phi_sums: np.ndarray, phi_top: np.ndarray, outside: float, acc: np.ndarray,
    out: np.ndarray, floor: float = -np.inf, touched: np.ndarray | None = None,
    discount: float = 0.0, tau: float = 1.0, same: np.ndarray | None = None,
    phi_e: np.ndarray | None = None, vbeta: float = 1.0, fresh_e: int = -1,
) -> None:  # fmt: skip
    """``out[k] ≥ log (m_k − d) + τ block_log_predictive(ws, k)`` for every category
    ``k < kmax`` (−inf when it cannot be chosen), with no logarithm per word (one per
    category when ``tau`` < 1).

    Each numerator's category part is exact: ``β Σ_{y∈k} O_kl inv[y]`` plus
    ``Σ_{y ∋ w_i} O_kl n_lw inv[y]``, gathered through the words' topics and the topics'
    categories into ``acc[k, i]`` (their largest term in ``acc[k, n + i]``). The earlier words'
    own topics add at most ``i × max_l φ_l(w_i)`` (``phi_top[i]``) — or, when every word's MAP
    topic under k provably stays among k's topics (the weight ``O_kl β inv[y]`` of k's heaviest
    topic exceeds ``outside``, the most any other topic or the unused class can weigh without
    own counts), at most ``i × max_{y∈k} φ_l(w_i)``. With a fresh topic ``fresh_e`` (its
    ``φ_e(w_i)`` in ``phi_e``, the words' earlier occurrences ``s_i`` in ``same``), the reading
    with all words in it adds at most ``(s_i (ζ + O_ke + i) + i (β + n_ew)) / (Vβ + n_e + i)``
    instead (its exact gain with the term ``−(ζ + O_ke) i (β + n_ew) / ((Vβ + n_e)(Vβ + n_e
    + i))`` dropped).

    A bound at or below ``floor`` is written as −inf without taking its logarithm (the caller
    already holds a score that high). ``touched`` (int scratch, ``kmax + 1`` entries) lets only
    the rows the words reach be cleared."""
    nlw, nl, inv, _ = tw
    okl, ok, mk, alive = cat[0], cat[1], cat[2], cat[3]
    nz, nzlen, cz, czlen, wz, wz_ptr, wzlen = ix[0], ix[1], ix[3], ix[4], ix[5], ix[6], ix[7]
    n = ws.shape[0]
    n_topics = nl.shape[0]
    n_touched = 0
    if touched is None:
        for k in range(kmax):
            for i in range(2 * n):
                acc[k, i] = 0.0
    else:  # rows not reached keep −1 in acc[k, 0] as "all zero"
        for k in range(kmax):
            acc[k, 0] = -1.0
    for i in range(n):
        w = ws[i]
        for q in range(wz_ptr[w], wz_ptr[w] + wzlen[w]):
            y = wz[q]
            c = nlw[w, y] * inv[y]
            if c <= 0.0:
                continue
            for r in range(czlen[y]):
                k = cz[y, r]
                if k < kmax:
                    if touched is not None and acc[k, 0] < 0.0:
                        for j in range(2 * n):
                            acc[k, j] = 0.0
                        touched[n_touched] = k
                        n_touched += 1
                    acc[k, i] += okl[k, y] * c
                    acc[k, n + i] = max(acc[k, n + i], c)
    lin_floor = math.exp(floor) if floor > -700.0 else 0.0
    tempered = tau != 1.0
    for k in range(kmax):
        if not alive[k] or mk[k] <= 0.0:
            out[k] = -np.inf
            continue
        reached = touched is None or acc[k, 0] >= 0.0
        b = 0.0
        heaviest = 0.0
        max_inv = 0.0
        for q in range(nzlen[k]):
            y = nz[k, q]
            x = okl[k, y] * inv[y]
            b += x
            heaviest = max(heaviest, x)
            max_inv = max(max_inv, inv[y])
        b *= beta
        inside = beta * heaviest > outside
        c_e = zeta + okl[k, fresh_e] if fresh_e >= 0 else 0.0  # the fresh topic's weight in k
        d_e = vbeta + nl[fresh_e] if fresh_e >= 0 else 1.0
        lw = 0.0
        prod = 1.0 if tempered else table_weight(mk[k], discount)
        for i in range(n):
            a_i = acc[k, i] if reached else 0.0
            a_max = acc[k, n + i] if reached else 0.0
            own = i * (beta * max_inv + a_max if inside else phi_top[i])
            if fresh_e >= 0 and same is not None and phi_e is not None:
                own = max(own, (same[i] * (c_e + i) + i * phi_e[i] * d_e) / (d_e + i))
            prod *= (zeta * phi_sums[i] + b + a_i + own) / (n_topics * zeta + ok[k] + i)
            if prod < 1e-250:
                lw += math.log(prod)
                prod = 1.0
        if tempered:  # the words' bound to the power τ, the weight outside it
            v = math.log(table_weight(mk[k], discount)) + tau * (lw + math.log(prod))
            out[k] = v if v > floor else -np.inf
        elif lw == 0.0 and prod <= lin_floor:
            out[k] = -np.inf  # cannot reach the floor: no logarithm needed
        else:
            out[k] = lw + math.log(prod)
