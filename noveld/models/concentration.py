"""The vMF concentration κ learned from the clusters' statistics (empirical Bayes), for
``cosine=None`` of :class:`~noveld.models.vmf.VMFConfig`.

Paper 003's M-step (eq. 10) sets a cluster's κ from its mean resultant length r̄ = ‖r‖/n. Here
the clusters share one κ, and r̄² is estimated from every live cluster's mass and resultant
without the small clusters' bias: for unit members ‖r‖² = n + Σ_{i≠j} x_i·x_j, so the mean
cosine between two members of one cluster is Σ_k (‖r_k‖² − n_k) / Σ_k n_k(n_k − 1), which
E[x_i·x_j] = r̄² (large n) relates to the typical member-to-mean cosine (singletons carry no
pair and no weight). The stream's background, the mean cosine between two documents of
different clusters, is taken out of it: a direction every document shares says nothing about
which cluster a document belongs to.
"""

from __future__ import annotations

import math

import numpy as np

#: the learned typical cosine is rounded to this grid: the seating's normaliser table is built
#: once per κ, and a value on a grid is the same on every replica
COSINE_STEP = 0.005

#: the weight, in member pairs, of the prior typical cosine (what the first batch uses)
PRIOR_PAIRS = 200.0

#: the learned typical cosine is kept in [LOW, HIGH] (eq. 10's κ is 0 at 0 and ∞ at 1)
LOW, HIGH = 0.05, 0.95


def pair_statistics(resultants: np.ndarray, mass: np.ndarray) -> tuple[float, float, float, float]:
    """(Σ_k ‖r_k‖² − n_k, Σ_k n_k(n_k − 1), ‖Σ_k r_k‖² − N, N(N − 1)) over the clusters of
    positive mass (rows of the kmax × p ``resultants``): the sums of member cosines x_i·x_j,
    i ≠ j, within clusters and over all pairs, and their numbers of pairs."""
    live = mass > 0.0
    r = resultants[live]
    n = mass[live]
    total = r.sum(axis=0)
    big_n = float(n.sum())
    return (
        float((np.einsum("kj,kj->k", r, r) - n).sum()),
        float((n * (n - 1.0)).sum()),
        float(total @ total) - big_n,
        big_n * (big_n - 1.0),
    )


def learned_cosine(
    resultants: np.ndarray, mass: np.ndarray, prior: float, background: bool = True
) -> float:
    """The typical member-to-mean cosine of the clusters (kmax × p ``resultants``, masses; dead
    slots have mass 0): the square root of the mean within-cluster pair cosine with the
    background b, the mean between-cluster pair cosine, taken out (``background``: each pair's
    cosine c becomes (c − b)/(1 − b)), shrunk
    towards ``prior`` by :data:`PRIOR_PAIRS` pairs, on the :data:`COSINE_STEP` grid in
    [:data:`LOW`, :data:`HIGH`]."""
    within, pairs, everywhere, all_pairs = pair_statistics(resultants, mass)
    if background and all_pairs > pairs:
        b = min(max((everywhere - within) / (all_pairs - pairs), 0.0), 0.99)
        within = (within - pairs * b) / (1.0 - b)
    c2 = (within + PRIOR_PAIRS * prior * prior) / (pairs + PRIOR_PAIRS)
    c = math.sqrt(min(max(c2, LOW * LOW), HIGH * HIGH))
    return round(round(c / COSINE_STEP) * COSINE_STEP, 6)
