"""numba kernel seating a batch under two views at once: CRP prior × the collapsed
Dirichlet–multinomial predictive of a document's words × (the collapsed vMF predictive of its
unit vector)^w.

The statistics are read, never written: the clusters' word counts come from the postings pool
(read-only, times the scale ``g``) plus a small overlay of the batch's own documents, the
vectors' resultants from dense arrays, so the model can apply the batch afterwards through the
same delta every replica applies. A document without a vector (a zero row) is scored on its
words only; one without words on its vector only (its Dirichlet–multinomial factor is 1).
The vMF normaliser comes from a Chebyshev table in ‖r‖²
(:func:`noveld.models.kernels.vmf_table.normalizer_table`), not a log-Bessel evaluation per
cluster per document.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from noveld.models.kernels.hybrid_words import _overlay_add, log_masses, word_scores, word_terms
from noveld.models.kernels.multinomial import MARGIN_CAP, TIE_TOL, choose, log_rising
from noveld.models.kernels.vmf import log_sphere_density_at_zero, log_vmf_normalizer
from noveld.models.kernels.vmf_table import log_normalizer_sq

#: a new slot whose mass falls below this (its documents all left) is closed
_EMPTY = 0.5

#: the seating; the words' scores (:mod:`~noveld.models.kernels.hybrid_words`) re-exported
__all__ = [
    "_overlay_add",
    "add_vector_scores",
    "log_masses",
    "map_scores",
    "new_vector_score",
    "seat_batch",
    "vector_bound",
    "word_scores",
    "word_terms",
]


@njit(cache=True)
def _map_choice(
    lp: np.ndarray, cand: np.ndarray, n_cand: int, lp_new: float, tie_uid: np.ndarray
) -> int:
    """:func:`~noveld.models.kernels.multinomial.choose`'s MAP choice alone, without the
    normaliser, over the slots ``cand[:n_cand]`` (increasing; the others' weights are −inf,
    which its scan passes over): −1 for a new cluster."""
    best = lp_new
    best_k = -1
    for c in range(n_cand):
        k = cand[c]
        v = lp[k]
        if v > best + TIE_TOL or (
            v >= best - TIE_TOL and best_k >= 0 and tie_uid[k] < tie_uid[best_k]
        ):
            best = v
            best_k = k
    return best_k


@njit(cache=True)
def add_vector_scores(
    i: int, n_slots: int, live: np.ndarray, rn2: np.ndarray, logc_r: np.ndarray,
    dots: np.ndarray, p: int, kappa: float, table: np.ndarray, logc_kappa: float,
    weight: float, lp: np.ndarray, prior_rn2: float, prior_dot: float,
) -> float:  # fmt: skip
    """Add ``weight`` × the collapsed vMF log predictive of document ``i``'s unit vector to
    ``lp[:n_slots]``; returns what the new cluster gets (``weight ·``
    :func:`new_vector_score`)::

        existing: log C_p(κ) + log C_p(κ‖r_k‖) − log C_p(κ‖r_k + x‖)
    """
    for k in range(n_slots):
        if live[k]:
            q = max(rn2[k] + 2.0 * dots[k, i] + 1.0, 0.0)
            lp[k] += weight * (logc_kappa + logc_r[k] - log_normalizer_sq(q, table, p, kappa))
    return weight * new_vector_score(prior_rn2, prior_dot, table, p, kappa, logc_kappa)


@njit(cache=True)
def new_vector_score(
    prior_rn2: float, prior_dot: float, table: np.ndarray, p: int, kappa: float,
    logc_kappa: float,
) -> float:  # fmt: skip
    """The new cluster's vMF log predictive of a unit vector x under the base measure whose
    pseudo-resultant is a·μ₀ (``prior_rn2`` = a², ``prior_dot`` = a·μ₀·x): an empty cluster
    scored as one whose resultant is a·μ₀, log C_p(κ) + log C_p(κa) − log C_p(κ‖a·μ₀ + x‖);
    the uniform density log C_p(0) when a = 0."""
    if prior_rn2 <= 0.0:
        return log_sphere_density_at_zero(p)
    q = max(prior_rn2 + 2.0 * prior_dot + 1.0, 0.0)
    return (
        logc_kappa + log_normalizer_sq(prior_rn2, table, p, kappa)
        - log_normalizer_sq(q, table, p, kappa)
    )  # fmt: skip


#: a MAP seating leaves out a slot whose score's upper bound falls this far below the best
_PRUNE_SLACK = 1e-6


@njit(cache=True)
def vector_bound(
    logc_kappa: float, logc_r: float, rn2: float, xmax: float, table: np.ndarray, p: int,
    kappa: float,
) -> float:  # fmt: skip
    """An upper bound on a slot's vMF term over vectors of norm ≤ ``xmax``: log C_p is
    decreasing and ‖r + x‖² ≤ (‖r‖ + ‖x‖)², plus a margin for the table's error."""
    far = log_normalizer_sq((math.sqrt(max(rn2, 0.0)) + xmax) ** 2, table, p, kappa)
    return logc_kappa + logc_r - far + 1e-10 * (abs(far) + abs(logc_r) + 1.0)


@njit(cache=True)
def map_scores(
    i: int, n_slots: int, nd: int, live: np.ndarray, log_mass: np.ndarray,
    log_ntok: np.ndarray, ntok: np.ndarray, vbeta: float, wt: np.ndarray, use_vector: bool,
    rn2: np.ndarray, logc_r: np.ndarray, bound: np.ndarray, dots: np.ndarray, p: int,
    kappa: float, table: np.ndarray, logc_kappa: float, weight: float, lp: np.ndarray,
    cand: np.ndarray, tau: float = 1.0,
) -> tuple[int, float, int]:  # fmt: skip
    """:func:`word_scores` (its words' part already in ``wt``, cleared here) and
    :func:`add_vector_scores` for a MAP choice: a slot whose upper bound (the prior with
    log Γ(n+Vβ+N)/Γ(n+Vβ) ≥ N·log(n+Vβ), ``log_ntok``, + its words + weight × its
    :func:`vector_bound`) falls :data:`_PRUNE_SLACK` below the best slot's score is set to
    −inf unscored. The slots that could win are scored exactly, by the same operations in the
    same order, the most promising first: the choice and the margin are the full scoring's.
    Returns the live slots' count, the best score and how many slots were scored, listed in
    increasing order in ``cand``."""
    first = -1
    top = -np.inf
    n_live = 0
    for k in range(n_slots):
        if live[k]:
            n_live += 1
            lp[k] = log_mass[k] + tau * (wt[k] - nd * log_ntok[k])
            if use_vector:
                lp[k] += weight * bound[k]
            if lp[k] > top:
                top = lp[k]
                first = k
        else:
            lp[k] = -np.inf
    best = -np.inf
    n_cand = 0
    for n in range(-1, n_slots):
        k = first if n < 0 else n
        if k < 0 or not live[k]:
            wt[max(k, 0)] = 0.0
            continue
        if n >= 0 and k == first:
            cand[n_cand] = k
            n_cand += 1
        elif lp[k] < best - _PRUNE_SLACK:
            lp[k] = -np.inf
        else:
            v = log_mass[k] + tau * (wt[k] - log_rising(ntok[k] + vbeta, nd))
            if use_vector:
                q = max(rn2[k] + 2.0 * dots[k, i] + 1.0, 0.0)
                v += weight * (logc_kappa + logc_r[k] - log_normalizer_sq(q, table, p, kappa))
            lp[k] = v
            best = max(best, v)
            if n >= 0:
                cand[n_cand] = k
                n_cand += 1
        if n >= 0:
            wt[k] = 0.0
    return n_live, best, n_cand


@njit(cache=True)
def _move(
    i: int, k: int, sign: float, doc_ptr: np.ndarray, doc_counts: np.ndarray,
    doc_loc: np.ndarray, nd: int, mass: np.ndarray, log_mass: np.ndarray, discount: float,
    ntok: np.ndarray, log_ntok: np.ndarray, vbeta: float, ov_ptr: np.ndarray,
    ov_slot: np.ndarray, ov_cnt: np.ndarray, ov_n: np.ndarray, rn2: np.ndarray,
    logc_r: np.ndarray, bound: np.ndarray, dots: np.ndarray, gram: np.ndarray, p: int,
    kappa: float, table: np.ndarray, logc_kappa: float, xmax: float,
) -> None:  # fmt: skip
    """Add (sign = +1) or remove (−1) batch document ``i`` to/from slot ``k``: its mass, tokens,
    words (overlay) and vector (‖r ± x‖² = ‖r‖² ± 2 r·x + x·x; x·x = 0 without a vector),
    keeping log(m − d), log(n + Vβ), log C_p(κ‖r‖) and the slot's :func:`vector_bound`
    current."""
    mass[k] += sign
    log_mass[k] = math.log(max(mass[k] - discount, 1e-3))
    ntok[k] += sign * nd
    log_ntok[k] = math.log(ntok[k] + vbeta)
    c_sign = 1 if sign > 0 else -1
    for j in range(doc_ptr[i], doc_ptr[i + 1]):
        _overlay_add(doc_loc[j], k, c_sign * doc_counts[j], ov_ptr, ov_slot, ov_cnt, ov_n)
    xx = gram[i, i]
    if xx > 0.0:
        rn2[k] = max(rn2[k] + sign * 2.0 * dots[k, i] + xx, 0.0)
        for j in range(gram.shape[0]):
            dots[k, j] += sign * gram[i, j]
        logc_r[k] = log_normalizer_sq(rn2[k], table, p, kappa)
        bound[k] = vector_bound(logc_kappa, logc_r[k], rn2[k], xmax, table, p, kappa)


@njit(cache=True, nogil=True)
def seat_batch(
    doc_ptr: np.ndarray, doc_words: np.ndarray, doc_counts: np.ndarray, doc_len: np.ndarray,
    doc_loc: np.ndarray, n_local: int, gram: np.ndarray, dots: np.ndarray, mass: np.ndarray,
    ntok: np.ndarray, rn2: np.ndarray, live: np.ndarray, tie_uid: np.ndarray, n_old: int,
    head: np.ndarray, nxt: np.ndarray, pk: np.ndarray, pc: np.ndarray, g: float, beta: float,
    vbeta: float, discount: float, log_alpha: float, p: int, kappa: float, table: np.ndarray,
    weight: float, deterministic: bool, want_norm: bool, uniforms: np.ndarray, sweeps: int,
    forced: np.ndarray, assign: np.ndarray, log_norm: np.ndarray, margin: np.ndarray,
    tau: np.ndarray, prior_rn2: float, prior_dots: np.ndarray,
) -> int:  # fmt: skip
    """Sequential CRP seating of a batch under both views, then ``sweeps`` collapsed Gibbs
    sweeps over it (remove, reseat); returns the number of slots used.

    Slots ``0 .. n_old−1`` are the existing clusters (true ``mass``, ``ntok``, ‖r‖² in ``rn2``,
    ``live`` = alive); slots ``n_old ..`` open for new clusters, in order, and close when their
    last document leaves. ``doc_loc`` numbers each (document, word) entry's word among the
    batch's ``n_local`` distinct words. ``gram`` is X·Xᵀ (symmetric; a zero row: no vector)
    and ``dots[k]``, one row per slot so that a move updates contiguous memory, starts as
    r_k·Xᵀ; both stay current. ``tie_uid`` orders MAP ties as
    :func:`~noveld.models.kernels.multinomial.choose` does (the oldest wins); new slots get
    increasing values after the old ones'. ``forced[i] ≥ 0`` seats document i there for good.
    Writes ``assign`` (slot), ``log_norm`` and ``margin`` (first pass) as the words kernel does;
    ``uniforms`` holds ``nb · (1 + sweeps)`` draws, document i of sweep s using ``s·nb + i``.
    ``tau[i]`` tempers document i's words predictive
    (:func:`~noveld.models.kernels.tempering.length_tempering`). The vectors' base measure has
    the pseudo-resultant a·μ₀ (:func:`new_vector_score`; ``prior_rn2`` = a², ``prior_dots`` =
    a·μ₀·Xᵀ, zeros when a = 0): the existing slots' ``rn2`` and ``dots`` include it, and a
    new slot opens with it.
    A MAP seating (``deterministic``) scores only the slots that could win
    (:func:`map_scores`) in the sweeps, and in the first pass too unless
    ``want_norm``: ``log_norm`` (NaN then) needs every slot's weight, the seats and margins
    do not.
    """
    nb = doc_len.shape[0]
    cap = mass.shape[0]
    # the overlay: for each distinct batch word, (slot, count) of the batch documents seated
    ov_ptr = np.zeros(n_local + 1, dtype=np.int64)
    for j in range(doc_loc.shape[0]):
        ov_ptr[doc_loc[j] + 1] += 1
    for u in range(n_local):
        ov_ptr[u + 1] += ov_ptr[u]
    ov_slot = np.empty(doc_loc.shape[0], dtype=np.int64)
    ov_cnt = np.empty(doc_loc.shape[0], dtype=np.int64)
    ov_n = np.zeros(n_local, dtype=np.int64)
    tmp = np.zeros(cap)
    touched = np.empty(cap, dtype=np.int64)
    lp = np.empty(cap)
    out = np.empty(2)
    logc_kappa = log_vmf_normalizer(p, kappa)
    xmax = 1.0  # the scores take x·x as 1; the bound holds for any longer vector too
    for i in range(nb):
        xmax = max(xmax, math.sqrt(gram[i, i]))
    log_mass = log_masses(mass, discount)
    logc_r, log_ntok, bound = np.empty(cap), np.empty(cap), np.empty(cap)
    for k in range(cap):
        logc_r[k] = log_normalizer_sq(max(rn2[k], 0.0), table, p, kappa)
        log_ntok[k] = math.log(ntok[k] + vbeta)
        bound[k] = vector_bound(logc_kappa, logc_r[k], rn2[k], xmax, table, p, kappa)
    wt = np.zeros(cap)
    cand = np.empty(cap, dtype=np.int64)
    n_live, best_old, n_cand = 0, -np.inf, 0
    use_vectors = weight != 0.0
    next_tie = 0
    for k in range(n_old):
        next_tie = max(next_tie, tie_uid[k] + 1)
    n_slots = n_old
    for sweep in range(sweeps + 1):
        for i in range(nb):
            if forced[i] >= 0 and sweep > 0:
                continue
            nd = doc_len[i]
            k_old = -1
            if sweep > 0:
                k_old = assign[i]
                _move(
                    i, k_old, -1.0, doc_ptr, doc_counts, doc_loc, nd, mass, log_mass, discount,
                    ntok, log_ntok, vbeta, ov_ptr, ov_slot, ov_cnt, ov_n, rn2, logc_r, bound,
                    dots, gram, p, kappa, table, logc_kappa, xmax,
                )  # fmt: skip
                if k_old >= n_old and mass[k_old] < _EMPTY:
                    live[k_old] = False
            map_only = deterministic and (sweep > 0 or not want_norm)
            has_vector = use_vectors and gram[i, i] > 0.0
            if map_only:
                word_terms(
                    i, doc_ptr, doc_words, doc_counts, doc_loc, n_old, live, head, nxt, pk, pc,
                    g, beta, ov_ptr, ov_slot, ov_cnt, ov_n, tmp, touched, wt,
                )  # fmt: skip
                n_live, best_old, n_cand = map_scores(
                    i, n_slots, nd, live, log_mass, log_ntok, ntok, vbeta, wt, has_vector, rn2,
                    logc_r, bound, dots, p, kappa, table, logc_kappa, weight, lp, cand, tau[i],
                )  # fmt: skip
                lp_new = math.log(math.exp(log_alpha) + discount * n_live)
                lp_new -= tau[i] * log_rising(vbeta, nd)
            else:
                lp_new = word_scores(
                    i, doc_ptr, doc_words, doc_counts, doc_loc, nd, n_old, n_slots, log_mass,
                    ntok, live, head, nxt, pk, pc, g, beta, vbeta, discount, log_alpha, ov_ptr,
                    ov_slot, ov_cnt, ov_n, tmp, touched, wt, lp, tau[i],
                )  # fmt: skip
                if has_vector:
                    add_vector_scores(
                        i, n_slots, live, rn2, logc_r, dots, p, kappa, table, logc_kappa,
                        weight, lp, prior_rn2, prior_dots[i],
                    )  # fmt: skip
            if has_vector:
                lp_new += weight * new_vector_score(
                    prior_rn2, prior_dots[i], table, p, kappa, logc_kappa
                )
            if map_only:
                k = _map_choice(lp, cand, n_cand, lp_new, tie_uid)
                out[0] = np.nan
                out[1] = min(lp_new - best_old, MARGIN_CAP)
            else:
                u = uniforms[sweep * nb + i]
                k = choose(lp, n_slots, lp_new, u, deterministic, out, tie_uid)
            if sweep == 0:
                log_norm[i] = out[0]
                margin[i] = out[1]
            if forced[i] >= 0:
                k = forced[i]
                margin[i] = -MARGIN_CAP
            elif k < 0 and k_old >= n_old and not live[k_old]:
                k = k_old  # alone, and better alone: its own slot (and tie order) again
                live[k] = True
            elif k < 0:
                k = n_slots
                for j in range(n_old, n_slots):
                    if not live[j]:
                        k = j
                        break
                if k == n_slots:
                    n_slots += 1
                live[k] = True
                tie_uid[k] = next_tie
                next_tie += 1
                mass[k] = 0.0
                log_mass[k] = math.log(max(-discount, 1e-3))
                ntok[k] = 0.0
                rn2[k] = prior_rn2
                logc_r[k] = log_normalizer_sq(prior_rn2, table, p, kappa)
                bound[k] = vector_bound(logc_kappa, logc_r[k], prior_rn2, xmax, table, p, kappa)
                for j in range(nb):
                    dots[k, j] = prior_dots[j]
            assign[i] = k
            _move(
                i, k, 1.0, doc_ptr, doc_counts, doc_loc, nd, mass, log_mass, discount, ntok,
                log_ntok, vbeta, ov_ptr, ov_slot, ov_cnt, ov_n, rn2, logc_r, bound, dots, gram,
                p, kappa, table, logc_kappa, xmax,
            )  # fmt: skip
    return n_slots
