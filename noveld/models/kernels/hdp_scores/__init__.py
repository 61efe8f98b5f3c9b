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

from noveld.models.kernels.hdp_scores.blocks import (
    block_log_predictive,
    earlier_occurrences,
    group_log_predictive,
)
from noveld.models.kernels.hdp_scores.categories import (
    block_scratch,
    choose_block_category,
    upper_bound_log_predictive,
)
from noveld.models.kernels.hdp_scores.topics import (
    CATS,
    CTL_SIZE,
    EMPTY_BELOW,
    FIRST_EMPTY,
    N_EMPTY,
    NEXT_UID,
    OVERFLOW,
    Arrays,
    best_used_topic,
    context_log_likelihood,
    draw_topic,
    list_unused,
    phi,
    phi_sum,
    pick,
    pick_log,
)

__all__ = [
    "CATS",
    "CTL_SIZE",
    "EMPTY_BELOW",
    "FIRST_EMPTY",
    "NEXT_UID",
    "N_EMPTY",
    "OVERFLOW",
    "Arrays",
    "best_used_topic",
    "block_log_predictive",
    "block_scratch",
    "choose_block_category",
    "context_log_likelihood",
    "draw_topic",
    "earlier_occurrences",
    "group_log_predictive",
    "list_unused",
    "phi",
    "phi_sum",
    "pick",
    "pick_log",
    "upper_bound_log_predictive",
]
