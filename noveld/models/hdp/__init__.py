"""The ``hdp`` model: two-level category/topic HDP with known labels (LBPL-NTM, paper 000 §3).
Pure: arrays in, arrays out.

L topics ``φ_l ~ Dir(β)`` over words; categories ``θ_k ~ Dir(ζ)`` over topics; each document is a
restaurant of the Chinese restaurant franchise whose tables serve categories (eqs. 3–7, the
sampler in :mod:`noveld.models.kernels.hdp_sampler`). A document's category is the one
generating most of its words; documents with a known label sit at one table of their label's
category.

State lives in the same :class:`MultinomialStats` pool as ``dpmm``'s, so the stores, the delta
log, replay and replicas work unchanged:

- topic ``l`` is a cluster with uid :func:`topic_uid` (its own uid slot) whose word counts are
  ``n_lw`` and whose token total is ``n_l``;
- category ``k`` is a cluster with an ordinary uid whose *words* are the topics' reserved
  vocabulary entries (:func:`topic_token`): its count of topic ``l``'s token is ``O_kl``, its
  token total ``O_k``, and its document mass ``m`` counts its tables ``m_k``.

Each batch is densified (topic–word counts of the batch's words only, category–topic counts),
sampled over its own variables, and written back as an additive :class:`StatsDelta` that the
writer applies through the same :func:`~noveld.models.dpmm.apply_additions` a replica uses —
replay is exact.
"""

from noveld.models.hdp.absorb import absorb_into_known, expected_word_stats
from noveld.models.hdp.batch_state import BatchState, context_counts
from noveld.models.hdp.concentrations import (
    ALPHA_PRIOR,
    CONCENTRATION_ITERS,
    GAMMA_PRIOR,
    resample_dp_concentration,
    resample_group_concentration,
    resample_py_concentration,
    resample_top_concentration,
)
from noveld.models.hdp.config import HDPConfig
from noveld.models.hdp.delta import batch_births, batch_delta
from noveld.models.hdp.model import HDP
from noveld.models.hdp.topics import (
    TOPIC_PREFIX,
    TOPIC_SLOT,
    is_topic,
    live_clusters,
    topic_token,
    topic_uid,
)

_BatchState = BatchState  # the name tests reach for

__all__ = [
    "ALPHA_PRIOR",
    "CONCENTRATION_ITERS",
    "GAMMA_PRIOR",
    "HDP",
    "TOPIC_PREFIX",
    "TOPIC_SLOT",
    "BatchState",
    "HDPConfig",
    "absorb_into_known",
    "batch_births",
    "batch_delta",
    "context_counts",
    "expected_word_stats",
    "is_topic",
    "live_clusters",
    "resample_dp_concentration",
    "resample_group_concentration",
    "resample_py_concentration",
    "resample_top_concentration",
    "topic_token",
    "topic_uid",
]
