"""Auxiliary-variable resampling of the ``hdp`` model's concentrations: γ of the category
level (DP or Pitman–Yor) and α of the tables per document."""

from __future__ import annotations

import math

import numpy as np

#: Gamma(shape, rate) priors of γ (categories) and α (tables per document): paper 000 §4.2's
#: a_γ = 1, b_γ = 0.001 and a_α = 5, b_α = 0.1, read as rates (read as scales, b_γ = 0.001 would
#: pin γ near zero); the auxiliary-variable updates below draw from their posteriors
GAMMA_PRIOR = (1.0, 0.001)
ALPHA_PRIOR = (5.0, 0.1)
CONCENTRATION_ITERS = 20  # auxiliary-variable iterations per batch


def resample_dp_concentration(
    value: float,
    clusters: int,
    items: float,
    rng: np.random.Generator,
    iters: int,
    prior: tuple[float, float] = GAMMA_PRIOR,
) -> float:
    """γ | K clusters among n items: Escobar & West (1995) auxiliary variable, ``iters`` steps.

    η ~ Beta(γ+1, n); with odds π/(1−π) = (a+K−1) / (n (b − log η)),
    γ ~ π Gamma(a+K, b − log η) + (1−π) Gamma(a+K−1, b − log η). Its stationary law is
    p(γ | K, n) ∝ p(γ) γ^K Γ(γ)/Γ(γ+n) (the CRP's likelihood of K clusters).
    """
    a, b = prior
    if clusters < 1 or items <= 0:
        return value
    for _ in range(iters):
        eta = rng.beta(value + 1.0, items)
        rate = b - math.log(max(eta, 1e-300))
        odds = (a + clusters - 1.0) / (items * rate)
        shape = a + clusters if rng.random() < odds / (1.0 + odds) else a + clusters - 1.0
        value = float(rng.gamma(shape, 1.0 / rate))
    return max(value, 1e-6)


def resample_py_concentration(
    value: float,
    discount: float,
    clusters: int,
    items: float,
    rng: np.random.Generator,
    iters: int,
    prior: tuple[float, float] = GAMMA_PRIOR,
) -> float:
    """θ of a Pitman–Yor process with discount d, given K clusters among n items: Teh (2006,
    "A Bayesian interpretation of interpolated Kneser–Ney", appendix C) auxiliary variables
    x ~ Beta(θ+1, n−1), y_i ~ Bernoulli(θ / (θ + d·i)) for i < K;
    θ ~ Gamma(a + Σ y_i, b − log x). Its stationary law is
    p(θ | K, n) ∝ p(θ) Π_{i<K} (θ + d·i) Γ(θ+1)/Γ(θ+n) (the PY EPPF's θ part)."""
    a, b = prior
    if clusters < 2 or items <= 1.0:
        return value
    steps = discount * np.arange(1, clusters, dtype=np.float64)
    for _ in range(iters):
        x = rng.beta(value + 1.0, items - 1.0)
        ys = rng.random(clusters - 1) < value / (value + steps)
        rate = b - math.log(max(x, 1e-300))
        value = float(rng.gamma(a + float(ys.sum()), 1.0 / rate))
    return max(value, 1e-6)


def resample_top_concentration(
    value: float, discount: float, clusters: int, items: float, rng: np.random.Generator
) -> float:
    """γ of the category level: Escobar & West for the DP (d = 0), Teh's scheme for d > 0."""
    if discount == 0.0:
        return resample_dp_concentration(value, clusters, items, rng, CONCENTRATION_ITERS)
    return resample_py_concentration(value, discount, clusters, items, rng, CONCENTRATION_ITERS)


def resample_group_concentration(
    value: float,
    tables: np.ndarray,
    customers: np.ndarray,
    rng: np.random.Generator,
    iters: int,
    prior: tuple[float, float] = ALPHA_PRIOR,
) -> float:
    """α | tables m_j and customers n_j of groups j (documents): Teh et al. (2006, HDP,
    appendix A) auxiliary variables w_j ~ Beta(α+1, n_j), s_j ~ Bernoulli(n_j / (n_j + α));
    α ~ Gamma(a + Σm_j − Σs_j, b − Σ log w_j)."""
    a, b = prior
    keep = customers > 0
    tables, customers = tables[keep], customers[keep].astype(np.float64)
    if tables.shape[0] == 0:
        return value
    for _ in range(iters):
        w = rng.beta(value + 1.0, customers)
        s = rng.random(customers.shape[0]) < customers / (customers + value)
        shape = a + float(tables.sum()) - float(s.sum())
        rate = b - float(np.log(np.maximum(w, 1e-300)).sum())
        value = float(rng.gamma(max(shape, 1e-6), 1.0 / rate))
    return max(value, 1e-6)
