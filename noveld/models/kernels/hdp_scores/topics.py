"""Predictives of the category/topic HDP's batch sampler (paper 000 eqs. 4–7), on sparse
batch-local counts. See :mod:`noveld.models.kernels.hdp_sampler` for the sampler and the layout:

- ``tw = (nlw, nl, inv, inv_sum)``: topic–word counts of the batch's words ``nlw[w, y]``,
  topic totals ``nl[y]``, ``inv[y] = 1/(Vβ + n_l)`` and ``inv_sum[0] = Σ_l inv[y]``;
- ``cat = (okl, ok, mk, alive, uid)``: category–topic counts, totals, tables, liveness, uids;
- ``ix = (nz, nzlen, innz, cz, czlen, wz, wz_ptr, wzlen)``: each category's topics
  ``nz[k, :nzlen[k]]`` (``innz`` marks them), each topic's categories ``cz[y, :czlen[y]]``, each
  word's topics ``wz[wz_ptr[w] : wz_ptr[w] + wzlen[w]]`` (a superset of those with ``n_lw > 0``);
- ``ctl``: ``[categories, next uid, overflow, unused topics, first unused topic]``.

Unused topics (``n_l < EMPTY_BELOW``) are exchangeable: in MAP mode they compete as one class.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from noveld.models.kernels.hdp import new_category_weight, table_weight

Arrays = tuple[np.ndarray, ...]  # a bundle of count or index arrays (numba passes tuples)
EMPTY_BELOW = 0.5  # a topic holding less than half a token is unused
CATS, NEXT_UID, OVERFLOW, N_EMPTY, FIRST_EMPTY = 0, 1, 2, 3, 4
CTL_SIZE = 5


@njit(cache=True, inline="always")
def phi(w: int, y: int, nlw: np.ndarray, inv: np.ndarray, beta: float) -> float:
    """Topic y's predictive of word w, ``(β + n_yw)/(Vβ + n_y)`` (paper 000, eq. 7's likelihood)."""
    return (beta + nlw[w, y]) * inv[y]


@njit(cache=True)
def phi_sum(w: int, tw: Arrays, ix: Arrays, beta: float) -> float:
    """``Σ_l φ_l(w) = β Σ_l inv[y] + Σ_{y ∋ w} n_lw inv[y]``."""
    nlw, _, inv, inv_sum = tw
    wz, wz_ptr, wzlen = ix[5], ix[6], ix[7]
    out = beta * inv_sum[0]
    for q in range(wz_ptr[w], wz_ptr[w] + wzlen[w]):
        y = wz[q]
        out += nlw[w, y] * inv[y]
    return out


@njit(cache=True)
def best_used_topic(w: int, tw: Arrays, ix: Arrays, beta: float, n_empty: int) -> int:
    """The used topic with the largest ``φ_l(w)``; −1 when none holds w and unused topics exist
    (the unused class then beats every used topic not holding w)."""
    nlw, nl, inv, _ = tw
    wz, wz_ptr, wzlen = ix[5], ix[6], ix[7]
    best, best_v = -1, -1.0
    for q in range(wz_ptr[w], wz_ptr[w] + wzlen[w]):
        y = wz[q]
        if nl[y] < EMPTY_BELOW or nlw[w, y] <= 0.0:
            continue
        v = phi(w, y, nlw, inv, beta)
        if v > best_v or (v == best_v and y < best):
            best, best_v = y, v
    if best < 0 and n_empty == 0:  # every topic used, none holds w: the lightest one
        for y in range(nl.shape[0]):
            v = phi(w, y, nlw, inv, beta)
            if v > best_v:
                best, best_v = y, v
    return best


@njit(cache=True)
def _own_count(y: int, own_t: np.ndarray, own_c: np.ndarray, n_own: int) -> float:
    for j in range(n_own):
        if own_t[j] == y:
            return own_c[j]
    return 0.0


@njit(cache=True)
def list_unused(ctl: np.ndarray, nl: np.ndarray, n: int, empties: np.ndarray) -> int:
    """The first ``min(n, #unused)`` unused topics in order into ``empties`` (a block of n words
    can claim at most n); returns the number of unused topics."""
    n_empty = ctl[N_EMPTY]
    m = 0
    y = ctl[FIRST_EMPTY]
    while 0 <= y < nl.shape[0] and m < min(n, n_empty):
        if nl[y] < EMPTY_BELOW:
            empties[m] = y
            m += 1
        y += 1
    return n_empty if m == min(n, n_empty) else m  # (fewer found: the bookkeeping is off)


@njit(cache=True)
def block_log_predictive(
    ws: np.ndarray, k: int, zeta: float, beta: float, tw: Arrays, cat: Arrays, ix: Arrays,
    phi_sums: np.ndarray, best_used: np.ndarray, empties: np.ndarray, n_empty: int,
    own_t: np.ndarray, own_c: np.ndarray,
) -> float:  # fmt: skip
    """``log p(w_1..n | k)`` for a table of words ``ws`` (batch-local ids, not counted) under
    category ``k`` (``k < 0``: a new one), topics summed out word by word (eqs. 4/5 × 7):
    ``Σ_i log [Σ_l (ζ + O_kl + c_l) φ_l(w_i) / (Lζ + O_k + i)]``, ``c`` counting the topics the
    earlier words took (each word's MAP topic under ``k``, ties to the lower topic, the unused
    class — winning only when strictly heavier — claimed in ``empties`` order).
    ``phi_sums[i] = Σ_l φ_l(w_i)``; ``best_used[i]`` as :func:`best_used_topic`."""
    nlw, nl, inv, _ = tw
    okl, ok = cat[0], cat[1]
    nz, nzlen = ix[0], ix[1]
    n_topics = nl.shape[0]
    n_own = 0
    claimed = 0
    out = 0.0
    base = ok[k] if k >= 0 else 0.0
    for i in range(ws.shape[0]):
        w = ws[i]
        num = zeta * phi_sums[i]
        best_v, best_l = -1.0, -1
        if k >= 0:
            for q in range(nzlen[k]):
                y = nz[k, q]
                ph = phi(w, y, nlw, inv, beta)
                num += okl[k, y] * ph
                v = (zeta + okl[k, y] + _own_count(y, own_t, own_c, n_own)) * ph
                if v > best_v or (v == best_v and y < best_l):
                    best_v, best_l = v, y
        for j in range(n_own):
            y = own_t[j]
            ph = phi(w, y, nlw, inv, beta)
            num += own_c[j] * ph
            v = (zeta + (okl[k, y] if k >= 0 else 0.0) + own_c[j]) * ph
            if v > best_v or (v == best_v and y < best_l):
                best_v, best_l = v, y
        out += math.log(num / (n_topics * zeta + base + i))
        y = best_used[i]
        if y >= 0:
            o = okl[k, y] if k >= 0 else 0.0
            v = (zeta + o + _own_count(y, own_t, own_c, n_own)) * phi(w, y, nlw, inv, beta)
            if v > best_v or (v == best_v and y < best_l):
                best_v, best_l = v, y
        if claimed < n_empty:
            e = empties[claimed]
            v = (n_empty - claimed) * zeta * phi(w, e, nlw, inv, beta)
            if v > best_v:
                best_v, best_l = v, e
                claimed += 1
        found = False
        for j in range(n_own):
            if own_t[j] == best_l:
                own_c[j] += 1.0
                found = True
        if not found:
            own_t[n_own] = best_l
            own_c[n_own] = 1.0
            n_own += 1
    return out


@njit(cache=True)
def _state_weights(
    w: int, k: int, zeta: float, beta: float, tw: Arrays, cat: Arrays, ix: Arrays,
    psum: float, bu: int,
) -> tuple[float, int, float]:  # fmt: skip
    """For word w under category k (``k < 0``: new), as the state has it: the predictive's
    numerator ``Σ_y (ζ + O_ky) φ_y(w)``, the used topic of largest weight and that weight
    (``psum = Σ_y φ_y(w)``, ``bu`` = :func:`best_used_topic` of w, precomputed)."""
    nlw, nl, inv, _ = tw
    okl = cat[0]
    nz, nzlen = ix[0], ix[1]
    num = zeta * psum
    best_v, best_l = -1.0, -1
    if k >= 0:
        for q in range(nzlen[k]):
            y = nz[k, q]
            ph = phi(w, y, nlw, inv, beta)
            num += okl[k, y] * ph
            v = (zeta + okl[k, y]) * ph
            if nl[y] >= EMPTY_BELOW and (v > best_v or (v == best_v and y < best_l)):
                best_v, best_l = v, y
    if bu >= 0:
        v = (zeta + (okl[k, bu] if k >= 0 else 0.0)) * phi(w, bu, nlw, inv, beta)
        if v > best_v or (v == best_v and bu < best_l):
            best_v, best_l = v, bu
    return num, best_l, best_v


@njit(cache=True)
def group_log_predictive(
    ws: np.ndarray, k: int, zeta: float, beta: float, vbeta: float, tw: Arrays, cat: Arrays,
    ix: Arrays, empties: np.ndarray, n_empty: int, pair_t: np.ndarray, pair_w: np.ndarray,
    psums: np.ndarray, bus: np.ndarray, nums: np.ndarray,
) -> float:  # fmt: skip
    """``log p(w_1..n | k)`` for the words of a *group* of documents under category ``k``
    (``k < 0``: a new one): as :func:`block_log_predictive` (topics summed out word by word,
    each word taking its MAP topic, unused topics as one class), but the earlier words count
    in their topics' word distributions as well as in the category's topic counts, so a burst's
    repeated words support each other as in the collapsed model; and the better of that reading
    and :func:`_one_fresh_topic`'s (greedy MAP can glue a new story onto an old topic through
    one shared first word). ``psums``/``bus`` hold each word's ``Σ_y φ_y(w)`` and best used
    topic; ``nums`` is scratch."""
    nlw, nl, inv, _ = tw
    okl, ok = cat[0], cat[1]
    n_topics = nl.shape[0]
    n = ws.shape[0]
    base = ok[k] if k >= 0 else 0.0
    # the group's own topics so far: slot s holds topic slot_t[s] with slot_c[s] words;
    # pair j (word ws[j]) sits in slot pair_t[j]
    slot_t = pair_w  # reuse the caller's scratch (n entries each)
    slot_c = np.zeros(n)
    same = np.zeros(n)
    n_slots = 0
    claimed = 0
    out = 0.0
    for i in range(n):
        w = ws[i]
        num, best_l, best_v = _state_weights(w, k, zeta, beta, tw, cat, ix, psums[i], bus[i])
        nums[i] = num
        for s in range(n_slots):
            same[s] = 0.0
        for j in range(i):  # earlier occurrences of this word, by the slot they sit in
            if ws[j] == w:
                same[pair_t[j]] += 1.0
        for s in range(n_slots):
            y = slot_t[s]
            o = okl[k, y] if k >= 0 else 0.0
            ph_own = (beta + nlw[w, y] + same[s]) / (vbeta + nl[y] + slot_c[s])
            v = (zeta + o + slot_c[s]) * ph_own
            num += v - (zeta + o) * phi(w, y, nlw, inv, beta)
            if v > best_v or (v == best_v and y < best_l):
                best_v, best_l = v, y
        out += math.log(num / (n_topics * zeta + base + i))
        if claimed < n_empty:
            e = empties[claimed]
            if (n_empty - claimed) * zeta * phi(w, e, nlw, inv, beta) > best_v:
                best_l = e
                claimed += 1
        s_of = -1
        for s in range(n_slots):
            if slot_t[s] == best_l:
                s_of = s
        if s_of < 0:
            s_of = n_slots
            slot_t[s_of] = best_l
            slot_c[s_of] = 0.0
            n_slots += 1
        slot_c[s_of] += 1.0
        pair_t[i] = s_of
    if n_empty > 0:
        out = max(out, _one_fresh_topic(ws, k, zeta, beta, vbeta, tw, cat, empties[0], nums))
    return out


@njit(cache=True)
def _one_fresh_topic(
    ws: np.ndarray, k: int, zeta: float, beta: float, vbeta: float, tw: Arrays, cat: Arrays,
    e: int, nums: np.ndarray,
) -> float:  # fmt: skip
    """The sequential predictive of ``ws`` under category ``k`` when all its words take the
    unused topic ``e`` (counted in ``e``'s word distribution as they come); ``nums[i]`` is the
    state's numerator for word i under k."""
    nlw, nl, inv, _ = tw
    okl, ok = cat[0], cat[1]
    n_topics = nl.shape[0]
    base = ok[k] if k >= 0 else 0.0
    o_e = okl[k, e] if k >= 0 else 0.0
    out = 0.0
    for i in range(ws.shape[0]):
        w = ws[i]
        num = nums[i]
        same = 0.0
        for j in range(i):
            if ws[j] == w:
                same += 1.0
        num += (zeta + o_e + i) * (beta + nlw[w, e] + same) / (vbeta + nl[e] + i)
        num -= (zeta + o_e) * phi(w, e, nlw, inv, beta)
        out += math.log(num / (n_topics * zeta + base + i))
    return out


@njit(cache=True)
def pick(weights: np.ndarray, n: int, u: float, deterministic: bool) -> int:
    """Argmax (first of ties: ``deterministic``) or a draw with uniform ``u`` from
    ``weights[:n]`` (non-negative)."""
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
def pick_log(logw: np.ndarray, n: int, u: float, deterministic: bool) -> int:
    """:func:`pick` on log weights (−inf allowed); ``logw`` is overwritten."""
    top = -np.inf
    for i in range(n):
        top = max(top, logw[i])
    for i in range(n):
        logw[i] = math.exp(logw[i] - top) if logw[i] > -np.inf else 0.0
    return pick(logw, n, u, deterministic)


@njit(cache=True)
def draw_topic(
    w: int, k: int, zeta: float, beta: float, tw: Arrays, cat: Arrays, ix: Arrays,
    ctl: np.ndarray, wts: np.ndarray, u: float, deterministic: bool,
) -> int:  # fmt: skip
    """Eq. 7: the topic of word w at a table serving category k.

    Sampled: over all L topics. MAP: ``(ζ + O_kl) φ_l(w)`` is largest among the category's
    topics, the word's topics, or — every other topic having ``ζ β/(Vβ + n_l)`` — the unused
    class (``#unused × ζ φ``) when it exists; only those are scored. Ties: the lower topic."""
    nlw, nl, inv, _ = tw
    okl = cat[0]
    nz, nzlen, wz, wz_ptr, wzlen = ix[0], ix[1], ix[5], ix[6], ix[7]
    n_topics = nl.shape[0]
    if not deterministic:
        for y in range(n_topics):
            wts[y] = (zeta + okl[k, y]) * phi(w, y, nlw, inv, beta)
        return pick(wts, n_topics, u, False)
    best, best_v = -1, -1.0
    for q in range(nzlen[k]):
        y = nz[k, q]
        if nl[y] >= EMPTY_BELOW:
            v = (zeta + okl[k, y]) * phi(w, y, nlw, inv, beta)
            if v > best_v or (v == best_v and y < best):
                best, best_v = y, v
    for q in range(wz_ptr[w], wz_ptr[w] + wzlen[w]):
        y = wz[q]
        if nl[y] >= EMPTY_BELOW:
            v = (zeta + okl[k, y]) * phi(w, y, nlw, inv, beta)
            if v > best_v or (v == best_v and y < best):
                best, best_v = y, v
    n_empty, e = ctl[N_EMPTY], ctl[FIRST_EMPTY]
    if n_empty > 0:
        return e if n_empty * zeta * phi(w, e, nlw, inv, beta) > best_v else best
    for y in range(n_topics):  # every topic used: one holding neither k nor w may win
        v = (zeta + okl[k, y]) * phi(w, y, nlw, inv, beta)
        if v > best_v:
            best, best_v = y, v
    return best


@njit(cache=True)
def choose_block_category(
    ws: np.ndarray, zeta: float, beta: float, vbeta: float, gamma: float, tw: Arrays,
    cat: Arrays, ix: Arrays, ctl: np.ndarray, kmax: int, scratch: Arrays, logw: np.ndarray,
    u: float, deterministic: bool, log_total: np.ndarray, extra: np.ndarray, has_extra: bool,
    discount: float = 0.0,
) -> int:  # fmt: skip
    """Eq. 6 for a table of words ``ws`` with their topics summed out
    (:func:`block_log_predictive`): a local category, or ``kmax`` for a new one. Category
    weights ``m_k − d`` and ``γ + d·K`` under a Pitman–Yor ``discount`` d (``m_k``, ``γ`` for
    d = 0). ``extra[k]``
    (``extra[kmax]`` for a new category) is added to each log weight: the document's context
    likelihood, or zeros (``has_extra`` false: nothing to add, and the bounds may use the new
    category's score as a floor).

    MAP scores every category by :func:`upper_bound_log_predictive` first and exactly only
    those whose bound reaches the best exact score so far (the result is the exact argmax,
    ties to the oldest); sampling scores all exactly. ``log_total[0]`` receives
    ``log Σ_k m_k p(ws|k) + γ p(ws|new)`` — exact for the categories scored exactly; the others
    enter with their bound, or not at all when even that is below the new category's weight
    (so it is within log(K + 1) of the truth, and in practice the pruned terms are many nats
    below the best)."""
    phi_sums, best_used, empties, own_t, own_c, phi_top, acc, touched = scratch
    nlw, nl, inv, _ = tw
    mk, alive = cat[2], cat[3]
    wz, wz_ptr, wzlen = ix[5], ix[6], ix[7]
    n = ws.shape[0]
    n_empty = ctl[N_EMPTY]
    for i in range(n):
        phi_sums[i] = phi_sum(ws[i], tw, ix, beta)
        best_used[i] = best_used_topic(ws[i], tw, ix, beta, n_empty)
    n_empty = list_unused(ctl, nl, n, empties)
    args = (zeta, beta, tw, cat, ix, phi_sums, best_used, empties, n_empty, own_t, own_c)
    new_w = new_category_weight(gamma, discount, mk, alive, kmax)
    logw[kmax] = math.log(new_w) + block_log_predictive(ws, -1, *args) + extra[kmax]
    if not deterministic:
        for k in range(kmax):
            live = alive[k] and mk[k] > 0.0
            lw = math.log(table_weight(mk[k], discount)) + block_log_predictive(ws, k, *args)
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
    floor = -np.inf if has_extra else logw[kmax] - 1e-9  # the new category's exact score
    upper_bound_log_predictive(ws, zeta, beta, tw, cat, ix, kmax, phi_sums, phi_top,
                               outside * (1.0 + 1e-9), acc, logw, floor, touched,
                               discount)  # fmt: skip
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
        v = math.log(table_weight(mk[k], discount)) + block_log_predictive(ws, k, *args)
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
    discount: float = 0.0,
) -> None:  # fmt: skip
    """``out[k] ≥ log (m_k − d) + block_log_predictive(ws, k)`` for every category
    ``k < kmax`` (−inf when it cannot be chosen), with no logarithm per word.

    Each numerator's category part is exact: ``β Σ_{y∈k} O_kl inv[y]`` plus
    ``Σ_{y ∋ w_i} O_kl n_lw inv[y]``, gathered through the words' topics and the topics'
    categories into ``acc[k, i]`` (their largest term in ``acc[k, n + i]``). The earlier words'
    own topics add at most ``i × max_l φ_l(w_i)`` (``phi_top[i]``) — or, when every word's MAP
    topic under k provably stays among k's topics (the weight ``O_kl β inv[y]`` of k's heaviest
    topic exceeds ``outside``, the most any other topic or the unused class can weigh without
    own counts), at most ``i × max_{y∈k} φ_l(w_i)``.

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
        lw = 0.0
        prod = table_weight(mk[k], discount)
        for i in range(n):
            a_i = acc[k, i] if reached else 0.0
            a_max = acc[k, n + i] if reached else 0.0
            own = beta * max_inv + a_max if inside else phi_top[i]
            prod *= (zeta * phi_sums[i] + b + a_i + i * own) / (n_topics * zeta + ok[k] + i)
            if prod < 1e-250:
                lw += math.log(prod)
                prod = 1.0
        if lw == 0.0 and prod <= lin_floor:
            out[k] = -np.inf  # cannot reach the floor: no logarithm needed
        else:
            out[k] = lw + math.log(prod)


@njit(cache=True)
def context_log_likelihood(
    d: int, k: int, eta: float, cx: Arrays
) -> float:  # fmt: skip
    """Document d's context under category k (``k < 0``: a new one), a Dirichlet(η)–categorical
    per field (paper 001's context observation at the category level):
    ``Σ_f log (η + c_k,f=v) / (η U_f + c_k,f)``, ``U_f`` the field's distinct values seen.
    ``cx = (ctx_ptr, value column, field column, U, counts[k, column], ...)``."""
    ctx_ptr, col_v, col_f, card, cvk = cx[0], cx[1], cx[2], cx[3], cx[4]
    out = 0.0
    for j in range(ctx_ptr[d], ctx_ptr[d + 1]):
        if k < 0:
            out -= math.log(card[j])
        else:
            out += math.log((eta + cvk[k, col_v[j]]) / (eta * card[j] + cvk[k, col_f[j]]))
    return out
