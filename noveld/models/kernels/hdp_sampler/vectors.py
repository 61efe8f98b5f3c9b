"""The hdp sampler's vector view: a document's unit vector as an observation of the category of
the table that carries its context, under a collapsed von Mises–Fisher predictive (paper 003).

Category k's vectors have resultant ``r_k``; with the base measure's pseudo-resultant ``a·μ₀``
(:class:`~noveld.models.hybrid_prior.DirectionPrior`; 0 under the uniform prior) and
``R_k = r_k + a·μ₀``, the predictive of a unit vector x, tempered by the view weight w, is::

    log p_w(x | k) = w · [log C_p(κ) + log C_p(κ‖R_k‖) − log C_p(κ‖R_k + x‖)]

A new category (and every row not opened yet) has ``R = a·μ₀``. The bundle rides at the end of
the context bundle ``cx`` (:func:`~noveld.models.hdp.batch_state.context_counts`):

``cx[6]`` the batch's vectors (n_docs × p; a zero row: none), ``cx[7]`` ``R`` (cap + 1 rows,
the last the new category's), ``cx[8]`` ``‖R_k‖²``, ``cx[9]`` ``log C_p(κ‖R_k‖)``, ``cx[10]``
(κ, w, log C_p(κ)), ``cx[11]`` the normaliser table
(:func:`~noveld.models.kernels.vmf_table.normalizer_table`), ``cx[12]`` 1 where a document has
a vector.
"""

from __future__ import annotations

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
    emb, res, rn2, logc, par, table = cx[6], cx[7], cx[8], cx[9], cx[10], cx[11]
    row = k if k >= 0 else res.shape[0] - 1
    p = emb.shape[1]
    dot = 0.0
    for j in range(p):
        dot += res[row, j] * emb[d, j]
    q = max(rn2[row] + 2.0 * dot + 1.0, 0.0)
    kappa, w, logc_kappa = par[0], par[1], par[2]
    return w * (logc_kappa + logc[row] - log_normalizer_sq(q, table, p, kappa))


@njit(cache=True)
def move_vector(d: int, k: int, s: float, cx: Arrays) -> None:
    """Add (s = 1) or remove (s = −1) document d's vector in category k's resultant."""
    if not has_vector(d, cx):
        return
    emb, res, rn2, logc, par, table = cx[6], cx[7], cx[8], cx[9], cx[10], cx[11]
    p = emb.shape[1]
    q = 0.0
    for j in range(p):
        res[k, j] += s * emb[d, j]
        q += res[k, j] * res[k, j]
    rn2[k] = q
    logc[k] = log_normalizer_sq(q, table, p, par[0])
