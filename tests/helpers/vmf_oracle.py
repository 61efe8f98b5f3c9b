"""The vmf seating kernel's dense oracle: every score recomputed from the resultants, under the
uniform prior on a cluster's mean direction or with a pseudo-resultant a·μ₀ in every live
cluster and in the new one; and the kernel run from the same dense state."""

from __future__ import annotations

import math

import numpy as np
from scipy.special import logsumexp

from noveld.models.kernels import vmf as vkern


def unit_rows(rng: np.random.Generator, n: int, p: int) -> np.ndarray:
    x = rng.standard_normal((n, p))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def oracle_scores(
    x: np.ndarray, mass: np.ndarray, r: np.ndarray, p: int, kappa: float, d: float, log_a: float,
    prior: np.ndarray | None = None,
) -> tuple[np.ndarray, float]:  # fmt: skip
    """Log weights of x into the live clusters (raw resultants ``r``; ``prior``: a·μ₀ added to
    each) and the new cluster's (the uniform density, or the predictive of resultant a·μ₀)."""
    logc = vkern.log_vmf_normalizer
    pseudo = np.zeros(p) if prior is None else prior
    out = np.full(mass.shape[0], -np.inf)
    for k in range(mass.shape[0]):
        if mass[k] > 0:
            rk = r[k] + pseudo
            out[k] = (
                math.log(max(mass[k] - d, 1e-3))
                + logc(p, kappa)
                + logc(p, kappa * float(np.linalg.norm(rk)))
                - logc(p, kappa * float(np.linalg.norm(rk + x)))
            )
    live = int((mass > 0).sum())
    if prior is None:
        new = vkern.log_sphere_density_at_zero(p)
    else:
        a = float(np.linalg.norm(prior))
        new = (
            logc(p, kappa) + logc(p, kappa * a) - logc(p, kappa * float(np.linalg.norm(prior + x)))
        )
    return out, math.log(math.exp(log_a) + d * live) + new


def oracle_seat(
    x: np.ndarray, mass0: np.ndarray, r0: np.ndarray, kappa: float, d: float, log_a: float,
    sweeps: int, prior: np.ndarray | None = None,
) -> tuple[list[int], list[float], list[float]]:  # fmt: skip
    """MAP sequential seating + sweeps, every score recomputed from the dense resultants."""
    nb, p = x.shape
    mass = np.concatenate([mass0, np.zeros(nb)])
    r = np.concatenate([r0, np.zeros((nb, p))])
    n_slots = mass0.shape[0]
    assign = [-1] * nb
    norms, margins = [0.0] * nb, [0.0] * nb
    for sweep in range(sweeps + 1):
        for i in range(nb):
            if sweep:
                mass[assign[i]] -= 1
                r[assign[i]] -= x[i]
            s, new = oracle_scores(x[i], mass[:n_slots], r[:n_slots], p, kappa, d, log_a, prior)
            best = int(np.argmax(s)) if n_slots else -1
            best_s = s[best] if n_slots else -np.inf
            if sweep == 0:
                norms[i] = float(logsumexp(np.append(s[np.isfinite(s)], new)))
                margins[i] = new - best_s
            if best_s > new:
                k = best
            else:
                empty = [j for j in range(mass0.shape[0], n_slots) if mass[j] <= 1e-9]
                k = empty[0] if empty else n_slots
                if k == n_slots:
                    n_slots += 1
                mass[k], r[k] = 0.0, 0.0
            assign[i] = k
            mass[k] += 1
            r[k] += x[i]
    return assign, norms, margins


def run_kernel(
    x: np.ndarray, mass0: np.ndarray, r0: np.ndarray, kappa: float, d: float, log_a: float,
    sweeps: int, forced: np.ndarray | None = None, deterministic: bool = True,
    prior: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """The kernel as ``partial_fit`` runs it: live slots' resultants with a·μ₀ (``prior``) in
    them, a new slot opening with it."""
    nb, p = x.shape
    k0 = mass0.shape[0]
    r = r0 if prior is None else r0 + np.outer(mass0 > 0, prior)
    mass = np.concatenate([mass0, np.zeros(nb)])
    rn2 = np.concatenate([(r * r).sum(1), np.zeros(nb)])
    dots = np.zeros((nb, k0 + nb))
    dots[:, :k0] = x @ r.T
    assign, log_norm, margin = np.empty(nb, dtype=np.int64), np.empty(nb), np.empty(nb)
    forced = np.full(nb, -1, dtype=np.int64) if forced is None else forced
    uniforms = np.random.default_rng(0).random(nb * (sweeps + 1))
    prior_rn2 = 0.0 if prior is None else float(prior @ prior)
    prior_dots = np.zeros(nb) if prior is None else x @ prior
    vkern.seat_batch(x @ x.T, dots, mass, rn2, k0, p, kappa, d, log_a, deterministic, uniforms,
                     sweeps, forced, assign, log_norm, margin, prior_rn2, prior_dots)  # fmt: skip
    return assign, log_norm, margin, mass, rn2
