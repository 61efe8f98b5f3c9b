"""numba kernels of the von Mises–Fisher likelihood (paper 003).

A cluster of unit vectors with resultant ``r = Σ x`` and a shared, known concentration κ has,
under a uniform prior on its mean direction μ, the posterior ``μ ~ vMF(r/‖r‖, κ‖r‖)``; the
collapsed predictive of a new unit vector x is then exact::

    p(x | r) = C_p(κ) · C_p(κ‖r‖) / C_p(κ‖r + x‖)        (C_p(0) = 1 / area of the sphere)

with paper 003's normaliser ``C_p(κ) = κ^{p/2−1} / ((2π)^{p/2} I_{p/2−1}(κ))`` (eq. 5's
``c_d(κ)``). Under the uniform prior an empty cluster predicts the uniform density ``C_p(0)``;
under a vMF prior on μ around μ₀ (:mod:`noveld.models.direction_prior`) every cluster's
resultant carries the pseudo-resultant a·μ₀ and an empty cluster is one whose resultant is a·μ₀
(:func:`new_cluster_score`). Either way seating compares densities on the same sphere. κ is set
from a typical member-to-mean cosine by paper 003's eq. 10 (:func:`kappa_from_cosine`).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

#: below this order the Debye expansion is not used (series / Hankel instead)
_DEBYE_MIN_ORDER = 15.0


@njit(cache=True)
def _log_iv_debye(nu: float, x: float) -> float:
    """log I_ν(x) by the uniform (Debye) asymptotic expansion in ν, four correction terms
    (Abramowitz & Stegun 9.7.7); relative error against scipy at most 3e-8 at ν = 15, 7e-9 at
    ν = 20, 1e-9 at ν = 30 (smaller for larger ν), any x > 0."""
    z = x / nu
    s = math.sqrt(1.0 + z * z)
    t = 1.0 / s
    eta = s + math.log(z / (1.0 + s))
    t2 = t * t
    u1 = t * (3.0 - 5.0 * t2) / 24.0
    u2 = t2 * (81.0 - 462.0 * t2 + 385.0 * t2 * t2) / 1152.0
    u3 = t * t2 * (30375.0 - 369603.0 * t2 + 765765.0 * t2 * t2 - 425425.0 * t2 * t2 * t2)
    u3 /= 414720.0
    t4 = t2 * t2
    u4 = (
        t4
        * (
            4465125.0
            - 94121676.0 * t2
            + 349922430.0 * t4
            - 446185740.0 * t4 * t2
            + 185910725.0 * t4 * t4
        )
        / 39813120.0
    )
    corr = 1.0 + u1 / nu + u2 / (nu * nu) + u3 / (nu * nu * nu) + u4 / (nu * nu * nu * nu)
    return nu * eta - 0.5 * math.log(2.0 * math.pi * nu) - 0.5 * math.log(s) + math.log(corr)


@njit(cache=True)
def _log_iv_series(nu: float, x: float) -> float:
    """log I_ν(x) from the power series Σ_k (x/2)^{2k+ν} / (k! Γ(k+ν+1)), summed in the log
    domain around its largest term (converges for every x; used for small ν and moderate x)."""
    lx = math.log(0.5 * x)
    # the largest term is near k* solving k(k+ν) = (x/2)²
    kstar = max(0.0, 0.5 * (-nu + math.sqrt(nu * nu + x * x)))
    k0 = int(kstar)
    top = (2.0 * k0 + nu) * lx - math.lgamma(k0 + 1.0) - math.lgamma(k0 + nu + 1.0)
    acc = 1.0
    # upward from k0
    term = 0.0
    k = k0
    while True:
        k += 1
        term += 2.0 * lx - math.log(k) - math.log(k + nu)
        e = math.exp(term)
        acc += e
        if e < 1e-17 * acc:
            break
    term = 0.0
    k = k0
    while k > 0:
        term -= 2.0 * lx - math.log(k) - math.log(k + nu)
        k -= 1
        e = math.exp(term)
        acc += e
        if e < 1e-17 * acc:
            break
    return top + math.log(acc)


@njit(cache=True)
def _log_iv_hankel(nu: float, x: float) -> float:
    """log I_ν(x) by the large-argument (Hankel) expansion, summed while its terms shrink
    (A&S 9.7.1); used for small ν with x > max(30, ν²)."""
    mu = 4.0 * nu * nu
    acc = 1.0
    term = 1.0
    for k in range(1, 60):
        term *= -(mu - (2.0 * k - 1.0) ** 2) / (k * 8.0 * x)
        if abs(term) < 1e-17:
            break
        acc += term
    return x - 0.5 * math.log(2.0 * math.pi * x) + math.log(acc)


@njit(cache=True)
def log_bessel_iv(nu: float, x: float) -> float:
    """log I_ν(x), the modified Bessel function of the first kind, for ν ≥ 0 and x ≥ 0
    (−inf at x = 0 for ν > 0), stable for the large ν and x of embedding dimensions."""
    if x <= 0.0:
        return 0.0 if nu == 0.0 else -np.inf
    if nu >= _DEBYE_MIN_ORDER:
        return _log_iv_debye(nu, x)
    if x <= max(30.0, nu * nu):
        return _log_iv_series(nu, x)
    return _log_iv_hankel(nu, x)


@njit(cache=True)
def log_sphere_density_at_zero(p: int) -> float:
    """log C_p(0) = −log(area of the unit sphere in R^p) = lgΓ(p/2) − log 2 − (p/2)·log π."""
    return math.lgamma(0.5 * p) - math.log(2.0) - 0.5 * p * math.log(math.pi)


@njit(cache=True)
def log_vmf_normalizer(p: int, kappa: float) -> float:
    """log C_p(κ) = (p/2−1)·log κ − (p/2)·log 2π − log I_{p/2−1}(κ) (paper 003 eq. 5's c_d)."""
    if kappa < 1e-8:
        return log_sphere_density_at_zero(p)
    nu = 0.5 * p - 1.0
    return nu * math.log(kappa) - 0.5 * p * math.log(2.0 * math.pi) - log_bessel_iv(nu, kappa)


def kappa_from_cosine(cosine: float, p: int) -> float:
    """Paper 003 eq. 10, κ ≈ (r̄p − r̄³)/(1 − r̄²), with r̄ the mean cosine between a cluster's
    members and its mean direction (Banerjee et al. 2005's approximation)."""
    if not 0.0 < cosine < 1.0:
        raise ValueError("the typical cosine must be in (0, 1)")
    return (cosine * p - cosine**3) / (1.0 - cosine * cosine)


@njit(cache=True)
def new_cluster_score(
    prior_rn2: float, prior_dot: float, p: int, kappa: float, logc_kappa: float
) -> float:
    """The new cluster's log predictive of a unit vector x under the base measure whose
    pseudo-resultant is a·μ₀ (``prior_rn2`` = a², ``prior_dot`` = a·μ₀·x): an empty cluster
    scored as one whose resultant is a·μ₀, log C_p(κ) + log C_p(κa) − log C_p(κ‖aμ₀ + x‖);
    the uniform density log C_p(0) when a = 0."""
    if prior_rn2 <= 0.0:
        return log_sphere_density_at_zero(p)
    q = max(prior_rn2 + 2.0 * prior_dot + 1.0, 0.0)
    return (
        logc_kappa
        + log_vmf_normalizer(p, kappa * math.sqrt(prior_rn2))
        - log_vmf_normalizer(p, kappa * math.sqrt(q))
    )


@njit(cache=True)
def _score(
    i: int,
    n_slots: int,
    mass: np.ndarray,
    rn2: np.ndarray,
    logc_r: np.ndarray,
    dots: np.ndarray,
    p: int,
    kappa: float,
    logc_kappa: float,
    discount: float,
    log_new: float,
    out: np.ndarray,
    prior_rn2: float,
    prior_dot: float,
) -> float:
    """Log seating weights of batch document ``i`` into ``out[:n_slots]`` (−inf for empty
    slots); returns the new-cluster weight. ``dots[i, k] = r_k · x_i``::

        existing: log(m_k − d) + log C_p(κ) + log C_p(κ‖r_k‖) − log C_p(κ‖r_k + x‖)
        new:      log(α + d·K) + new_cluster_score  (log C_p(0) under the uniform prior)
    """
    live = 0
    for k in range(n_slots):
        if mass[k] <= 0.0:
            out[k] = -np.inf
            continue
        live += 1
        r_new = math.sqrt(max(rn2[k] + 2.0 * dots[i, k] + 1.0, 0.0))
        out[k] = (
            math.log(max(mass[k] - discount, 1e-3))
            + logc_kappa
            + logc_r[k]
            - log_vmf_normalizer(p, kappa * r_new)
        )
    return math.log(math.exp(log_new) + discount * live) + new_cluster_score(
        prior_rn2, prior_dot, p, kappa, logc_kappa
    )


@njit(cache=True)
def _move(
    i: int, k: int, sign: float, mass: np.ndarray, rn2: np.ndarray, logc_r: np.ndarray,
    dots: np.ndarray, gram: np.ndarray, p: int, kappa: float,
) -> None:  # fmt: skip
    """Add (sign = +1) or remove (−1) batch document ``i`` to/from slot ``k``."""
    mass[k] += sign
    # ‖r ± x‖² = ‖r‖² ± 2 r·x + 1, with r·x = dots[i, k] before the move (x·x = 1)
    rn2[k] = max(rn2[k] + sign * 2.0 * dots[i, k] + 1.0, 0.0)
    nb = gram.shape[0]
    for j in range(nb):
        dots[j, k] += sign * gram[j, i]
    if sign < 0 and mass[k] <= 1e-9 and k >= 0:
        rn2[k] = 0.0
    logc_r[k] = log_vmf_normalizer(p, kappa * math.sqrt(rn2[k]))


@njit(cache=True)
def seat_batch(
    gram: np.ndarray,
    dots: np.ndarray,
    mass: np.ndarray,
    rn2: np.ndarray,
    n_old: int,
    p: int,
    kappa: float,
    discount: float,
    log_new: float,
    deterministic: bool,
    uniforms: np.ndarray,
    sweeps: int,
    forced: np.ndarray,
    assign: np.ndarray,
    log_norm: np.ndarray,
    margin: np.ndarray,
    prior_rn2: float,
    prior_dots: np.ndarray,
) -> None:
    """Sequential CRP seating of a batch of unit vectors, then ``sweeps`` collapsed Gibbs
    sweeps over it (remove, reseat), under the vMF predictive above.

    Slots ``0 .. n_old−1`` are the existing clusters (true mass and ‖r‖², ``mass ≤ 0`` = not
    live); slots ``n_old ..`` are opened for new clusters in order. ``gram`` is X·Xᵀ of the batch
    and ``dots[:, k]`` starts as X·r_k; both stay current as documents move. ``forced[i] ≥ 0``
    seats document i there and never moves it. Writes ``assign`` (slot), ``log_norm`` (log of the
    seating weights' sum at the first pass) and ``margin`` (``new − best existing``).
    The base measure has the pseudo-resultant a·μ₀ (:func:`new_cluster_score`; ``prior_rn2`` =
    a², ``prior_dots`` = X·aμ₀, zeros under the uniform prior): the existing slots' ``rn2`` and
    ``dots`` include it, and a new slot opens with it.
    """
    nb = gram.shape[0]
    n_slots = n_old
    logc_kappa = log_vmf_normalizer(p, kappa)
    logc_r = np.empty(mass.shape[0])
    for k in range(mass.shape[0]):
        logc_r[k] = log_vmf_normalizer(p, kappa * math.sqrt(max(rn2[k], 0.0)))
    out = np.empty(mass.shape[0])
    u = 0
    for sweep in range(sweeps + 1):
        for i in range(nb):
            if forced[i] >= 0:
                if sweep == 0:
                    assign[i] = forced[i]
                    _move(i, forced[i], 1.0, mass, rn2, logc_r, dots, gram, p, kappa)
                    log_norm[i] = 0.0
                    margin[i] = -np.inf
                continue
            if sweep > 0:
                _move(i, assign[i], -1.0, mass, rn2, logc_r, dots, gram, p, kappa)
            lp_new = _score(
                i, n_slots, mass, rn2, logc_r, dots, p, kappa, logc_kappa, discount, log_new, out,
                prior_rn2, prior_dots[i],
            )  # fmt: skip
            best = -np.inf
            best_k = -1
            for k in range(n_slots):
                if out[k] > best:
                    best = out[k]
                    best_k = k
            top = max(best, lp_new)
            total = math.exp(lp_new - top)
            for k in range(n_slots):
                if out[k] > -np.inf:
                    total += math.exp(out[k] - top)
            if deterministic:
                choice = best_k if best > lp_new else -1
            else:
                target = uniforms[u] * total
                acc = 0.0
                choice = -1
                for k in range(n_slots):
                    if out[k] > -np.inf:
                        acc += math.exp(out[k] - top)
                        if acc >= target:
                            choice = k
                            break
            u += 1
            if choice < 0:
                # reuse an emptied new slot before opening another
                choice = n_slots
                for k in range(n_old, n_slots):
                    if mass[k] <= 1e-9:
                        choice = k
                        break
                if choice == n_slots:
                    n_slots += 1
                mass[choice] = 0.0
                rn2[choice] = prior_rn2
                for j in range(nb):
                    dots[j, choice] = prior_dots[j]
            if sweep == 0:
                log_norm[i] = top + math.log(total)
                margin[i] = lp_new - best
            assign[i] = choice
            _move(i, choice, 1.0, mass, rn2, logc_r, dots, gram, p, kappa)


@njit(cache=True)
def gather_resultants(
    pos_ids: np.ndarray,
    neg_ids: np.ndarray,
    head: np.ndarray,
    nxt: np.ndarray,
    pk: np.ndarray,
    pc: np.ndarray,
    kmax: int,
    scale: float,
    out: np.ndarray,
) -> None:
    """Dense resultants ``out[k, j] = (count of pos_ids[j] − count of neg_ids[j]) · scale`` for
    slots k < kmax, read from the postings pool (a resultant is stored as two non-negative
    reserved 'words' per dimension, so the count store, its deltas and replay carry it)."""
    out[:, :] = 0.0
    for j in range(pos_ids.shape[0]):
        for sign in (1.0, -1.0):
            w = pos_ids[j] if sign > 0 else neg_ids[j]
            if w >= head.shape[0]:
                continue
            e = head[w]
            while e >= 0:
                k = pk[e]
                if k < kmax:
                    out[k, j] += sign * pc[e] * scale
                e = nxt[e]
