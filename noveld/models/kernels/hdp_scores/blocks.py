"""Log predictives of a table's or a group's words under one category, topics summed out word
by word (paper 000 eqs. 4/5 × 7): the scores the first pass and the group moves compare."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from noveld.models.kernels.hdp_scores.topics import EMPTY_BELOW, Arrays, phi


@njit(cache=True)
def block_log_predictive(
    ws: np.ndarray, k: int, zeta: float, beta: float, tw: Arrays, cat: Arrays, ix: Arrays,
    phi_sums: np.ndarray, best_used: np.ndarray, empties: np.ndarray, n_empty: int,
    own_t: np.ndarray, own_c: np.ndarray, vbeta: float, same: np.ndarray,
) -> float:  # fmt: skip
    """``log p(w_1..n | k)`` for a table of words ``ws`` (batch-local ids, not counted) under
    category ``k`` (``k < 0``: a new one), topics summed out word by word (eqs. 4/5 × 7), by
    the better of two readings of the words' topics:

    - each word its MAP topic: ``Σ_i log [Σ_l (ζ + O_kl + c_l) φ_l(w_i) / (Lζ + O_k + i)]``,
      ``c`` counting the topics the earlier words took (ties to the lower topic, the unused
      class — winning only when strictly heavier — claimed in ``empties`` order);
    - when a topic is unused, all the words in the first one, ``e``, counted in its word
      distribution as they come (``φ_e`` of the i-th word ``(β + n_ew + s_i)/(Vβ + n_e + i)``,
      ``s_i = same[i]`` its earlier occurrences in ``ws``), as the collapsed model counts a
      new topic's words. Without it a new story's words all score ``1/V`` however often the
      document repeats them, and a long article can never open a category.

    ``phi_sums[i] = Σ_l φ_l(w_i)``; ``best_used[i]`` as :func:`best_used_topic`."""
    nlw, nl, inv, _ = tw
    okl, ok = cat[0], cat[1]
    nz, nzlen = ix[0], ix[1]
    n_topics = nl.shape[0]
    n_own = 0
    claimed = 0
    out = 0.0
    fresh = 0.0
    e = empties[0] if n_empty > 0 else -1
    o_e = okl[k, e] if k >= 0 and e >= 0 else 0.0
    base = ok[k] if k >= 0 else 0.0
    own = np.zeros(n_topics)  # own_c by topic, so a topic's own count is one look-up
    for i in range(ws.shape[0]):
        w = ws[i]
        num = zeta * phi_sums[i]
        best_v, best_l = -1.0, -1
        if k >= 0:
            for q in range(nzlen[k]):
                y = nz[k, q]
                ph = phi(w, y, nlw, inv, beta)
                num += okl[k, y] * ph
                v = (zeta + okl[k, y] + own[y]) * ph
                if v > best_v or (v == best_v and y < best_l):
                    best_v, best_l = v, y
        if e >= 0:
            f = num - (zeta + o_e) * phi(w, e, nlw, inv, beta)
            f += (zeta + o_e + i) * (beta + nlw[w, e] + same[i]) / (vbeta + nl[e] + i)
            fresh += math.log(f / (n_topics * zeta + base + i))
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
            v = (zeta + o + own[y]) * phi(w, y, nlw, inv, beta)
            if v > best_v or (v == best_v and y < best_l):
                best_v, best_l = v, y
        if claimed < n_empty:
            e = empties[claimed]
            v = (n_empty - claimed) * zeta * phi(w, e, nlw, inv, beta)
            if v > best_v:
                best_v, best_l = v, e
                claimed += 1
        if own[best_l] > 0.0:
            for j in range(n_own):
                if own_t[j] == best_l:
                    own_c[j] += 1.0
        else:
            own_t[n_own] = best_l
            own_c[n_own] = 1.0
            n_own += 1
        own[best_l] += 1.0
    return max(out, fresh) if e >= 0 else out


@njit(cache=True)
def earlier_occurrences(ws: np.ndarray, out: np.ndarray) -> None:
    """``out[i]``: how many times ``ws[i]`` occurs in ``ws[:i]`` (a stable sort, so no array
    over the vocabulary)."""
    order = np.argsort(ws, kind="mergesort")
    run = 0
    for j in range(order.shape[0]):
        if j > 0 and ws[order[j]] == ws[order[j - 1]]:
            run += 1
        else:
            run = 0
        out[order[j]] = run


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
    # each distinct word's earlier occurrences by slot, as a list of (slot, count) nodes, so
    # a word's ``same`` costs its own slots rather than a scan of every earlier word
    word_of, n_distinct = _distinct_words(ws, nlw.shape[0])
    head = np.full(n_distinct, -1, dtype=np.int64)
    node_slot = np.empty(n, dtype=np.int64)
    node_cnt = np.empty(n)
    node_next = np.empty(n, dtype=np.int64)
    n_nodes = 0
    n_slots = 0
    claimed = 0
    out = 0.0
    for i in range(n):
        w = ws[i]
        cw = word_of[i]
        num, best_l, best_v = _state_weights(w, k, zeta, beta, tw, cat, ix, psums[i], bus[i])
        nums[i] = num
        e = head[cw]
        while e >= 0:  # earlier occurrences of this word, by the slot they sit in
            same[node_slot[e]] = node_cnt[e]
            e = node_next[e]
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
        found = False
        e = head[cw]
        while e >= 0:
            same[node_slot[e]] = 0.0
            if node_slot[e] == s_of:
                node_cnt[e] += 1.0
                found = True
            e = node_next[e]
        if not found:
            node_slot[n_nodes] = s_of
            node_cnt[n_nodes] = 1.0
            node_next[n_nodes] = head[cw]
            head[cw] = n_nodes
            n_nodes += 1
    if n_empty > 0:
        out = max(out, _one_fresh_topic(ws, k, zeta, beta, vbeta, tw, cat, empties[0], nums,
                                            word_of, n_distinct))  # fmt: skip
    return out


@njit(cache=True)
def _distinct_words(ws: np.ndarray, n_words: int) -> tuple[np.ndarray, int]:
    """Each position's distinct-word number (0, 1, … in order of first occurrence) and how many
    distinct words ``ws`` holds (its ids are below ``n_words``)."""
    number = np.full(n_words, -1, dtype=np.int64)
    word_of = np.empty(ws.shape[0], dtype=np.int64)
    n_distinct = 0
    for i in range(ws.shape[0]):
        w = ws[i]
        if number[w] < 0:
            number[w] = n_distinct
            n_distinct += 1
        word_of[i] = number[w]
    return word_of, n_distinct


@njit(cache=True)
def _one_fresh_topic(
    ws: np.ndarray, k: int, zeta: float, beta: float, vbeta: float, tw: Arrays, cat: Arrays,
    e: int, nums: np.ndarray, word_of: np.ndarray, n_distinct: int,
) -> float:  # fmt: skip
    """The sequential predictive of ``ws`` under category ``k`` when all its words take the
    unused topic ``e`` (counted in ``e``'s word distribution as they come); ``nums[i]`` is the
    state's numerator for word i under k; ``word_of`` numbers the distinct words
    (:func:`_distinct_words`)."""
    nlw, nl, inv, _ = tw
    okl, ok = cat[0], cat[1]
    n_topics = nl.shape[0]
    base = ok[k] if k >= 0 else 0.0
    o_e = okl[k, e] if k >= 0 else 0.0
    seen = np.zeros(n_distinct)  # earlier occurrences of each distinct word
    out = 0.0
    for i in range(ws.shape[0]):
        w = ws[i]
        num = nums[i]
        same = seen[word_of[i]]
        seen[word_of[i]] += 1.0
        num += (zeta + o_e + i) * (beta + nlw[w, e] + same) / (vbeta + nl[e] + i)
        num -= (zeta + o_e) * phi(w, e, nlw, inv, beta)
        out += math.log(num / (n_topics * zeta + base + i))
    return out
