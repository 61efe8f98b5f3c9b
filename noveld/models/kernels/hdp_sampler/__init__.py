"""The per-batch Chinese-restaurant-franchise sampler of the category/topic HDP (LBPL-NTM,
paper 000 §3.3, Algorithm 1, restricted to one mini-batch).

Earlier batches are fixed and enter through their counts; the batch's own variables — each
word's table ``t`` and topic ``y``, each table's category ``k`` — are seated once and then
swept. The counts and sparse indexes (bundles ``tw``, ``cat``, ``ix`` and ``ctl``) are described
in :mod:`noveld.models.kernels.hdp_scores`; they make every step cost what a word or a category
actually uses, not the number of topics L.

Conditionals (paper 000):

- eq. 4/5 ``f(y | θ_k) = (ζ + O_ky) / (Lζ + O_k)``; a new category has ``1/L``;
- eq. 3 (table of a word, its topic known) ``∝ s_t f(y | θ_{k_t})``, new table
  ``∝ α G(y)``, ``G(y) = (Σ_k m_k f(y|θ_k) + γ/L) / (M + γ)``; a new table's category by
  eq. 6 for that word;
- eq. 6 (category of a table) ``∝ m_k Π_n f(y_n | θ_k)`` sequentially, new ``∝ γ Π f(y_n|θ_new)``;
- eq. 7 (topic of a word) ``∝ f(l | θ_{k_t}) (β + n_lw) / (Vβ + n_l)``.

Two departures, both needed for short texts in a stream (docs/model.md):

1. *Words have no topic when their document is first seated*, so the first pass seats a
   document at one table whose category is chosen by eq. 6 with the topics summed out word by
   word (:func:`~noveld.models.kernels.hdp_scores.block_log_predictive`), then draws each word's
   topic by eq. 7. With ``blocked`` the k-step of the sweeps is the same move (a table's
   category and topics together); otherwise it is eq. 6 given the topics.
2. *MAP over exchangeable topics*: unused topics are interchangeable, so in MAP mode they
   compete as one class (their summed weight) against each used topic, as a sampler would see
   them; when the class wins the lowest-numbered unused topic is taken.
"""

from noveld.models.kernels.hdp_sampler.counts import (
    context_weights,
    document_log_likelihood,
    has_context,
    move_context,
    move_token,
    open_category,
)
from noveld.models.kernels.hdp_sampler.steps import (
    new_table_weight,
    seat_document,
    table_category,
    word_table,
)
from noveld.models.kernels.hdp_sampler.sweeps import reseat_member, sample_batch, uniforms_needed
from noveld.models.kernels.hdp_sampler.vectors import (
    has_vector,
    move_vector,
    vector_log_likelihood,
)

__all__ = [
    "context_weights",
    "document_log_likelihood",
    "has_context",
    "has_vector",
    "move_context",
    "move_token",
    "move_vector",
    "new_table_weight",
    "open_category",
    "reseat_member",
    "sample_batch",
    "seat_document",
    "table_category",
    "uniforms_needed",
    "vector_log_likelihood",
    "word_table",
]
