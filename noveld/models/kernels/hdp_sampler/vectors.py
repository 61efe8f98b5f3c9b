"""The hdp sampler's vector view: a document's unit vector as an observation of the category of
the table that carries its context, under a collapsed von Mises–Fisher predictive (paper 003).

Category k's vectors have resultant ``r_k``; with the base measure's pseudo-resultant ``a·μ₀``
(:class:`~noveld.models.hybrid_prior.DirectionPrior`; 0 under the uniform prior) and
``R_k = r_k + a·μ₀``, the predictive of a unit vector x, tempered by the view weight w, is::

    log p_w(x | k) = w · [log C_p(κ) + log C_p(κ‖R_k‖) − log C_p(κ‖R_k + x‖)]

A new category (and every row not opened yet) has ``R = a·μ₀``. The bundle rides at the end of
the context bundle ``cx`` (:func:`~noveld.models.hdp.batch_state.context_counts`):

``cx[6]`` the batch's vectors X (n_docs × p; a zero row: none), ``cx[7]`` ``X·Rᵀ`` (n_docs ×
(cap + 1): every document's dot with every row's R, the last row the new category's), ``cx[8]``
``‖R_k‖²``, ``cx[9]`` ``log C_p(κ‖R_k‖)``, ``cx[10]`` (κ, w, log C_p(κ)), ``cx[11]`` the
normaliser table (:func:`~noveld.models.kernels.vmf_table.normalizer_table`), ``cx[12]`` 1 where
a document has a vector, ``cx[13]`` the Gram matrix X·Xᵀ. A document moving in or out updates a
column of dots in n_docs steps, so a score costs one table lookup per category, not p.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from noveld.models.kernels.hdp_scores.topics import Arrays
from noveld.models.kernels.vmf_table import log_normalizer_sq


@njit(cache=True, inline="always")
def has_vector(d: int, cx: Arrays) -> bool:
    """Whether document d has a vector the model reads."""
    return bool(cx[12][d] != 0)


@njit(cache=True)
def vector_log_likelihood(d: int, k: int, cx: Arrays) -> float:
    """``log p_w(x_d | k)`` (``k < 0``: a new category); 0 without a vector."""
    if not has_vector(d, cx):
        return 0.0
    dots, rn2, logc, par, table, gram = cx[7], cx[8], cx[9], cx[10], cx[11], cx[13]
    row = k if k >= 0 else dots.shape[1] - 1
    q = max(rn2[row] + 2.0 * dots[d, row] + gram[d, d], 0.0)
    kappa, w, logc_kappa = par[0], par[1], par[2]
    return w * (logc_kappa + logc[row] - log_normalizer_sq(q, table, cx[6].shape[1], kappa))


@njit(cache=True)
def add_vector_weights(d: int, kmax: int, cx: Arrays, extra: np.ndarray) -> None:
    """``extra[k] += log p_w(x_d | k)`` for k < kmax and the new category at ``extra[kmax]``
    (:func:`vector_log_likelihood` in one pass over the categories)."""
    if not has_vector(d, cx):
        return
    dots, rn2, logc, par, table, gram = cx[7], cx[8], cx[9], cx[10], cx[11], cx[13]
    p = cx[6].shape[1]
    kappa, w, logc_kappa = par[0], par[1], par[2]
    self_dot = gram[d, d]
    new_row = dots.shape[1] - 1
    for k in range(kmax + 1):
        row = k if k < kmax else new_row
        q = max(rn2[row] + 2.0 * dots[d, row] + self_dot, 0.0)
        extra[k] += w * (logc_kappa + logc[row] - log_normalizer_sq(q, table, p, kappa))


@njit(cache=True)
def move_vector(d: int, k: int, s: float, cx: Arrays) -> None:
    """Add (s = 1) or remove (s = −1) document d's vector in category k's resultant:
    ``‖R ± x‖² = ‖R‖² ± 2 R·x + x·x`` with R·x before the move, then every document's dot
    with R."""
    if not has_vector(d, cx):
        return
    dots, rn2, logc, par, table, gram = cx[7], cx[8], cx[9], cx[10], cx[11], cx[13]
    q = max(rn2[k] + s * 2.0 * dots[d, k] + gram[d, d], 0.0)
    rn2[k] = q
    logc[k] = log_normalizer_sq(q, table, cx[6].shape[1], par[0])
    for j in range(dots.shape[0]):
        dots[j, k] += s * gram[j, d]
