"""The ``hdp`` model: two-level category/topic HDP with known labels (LBPL-NTM, paper 000 §3)."""

from noveld.models.hdp.model import (
    ALPHA_PRIOR,
    CONCENTRATION_ITERS,
    GAMMA_PRIOR,
    HDP,
    TOPIC_PREFIX,
    TOPIC_SLOT,
    HDPConfig,
    _BatchState,
    is_topic,
    live_clusters,
    resample_dp_concentration,
    resample_group_concentration,
    resample_py_concentration,
    resample_top_concentration,
    topic_token,
    topic_uid,
)

__all__ = [
    "ALPHA_PRIOR",
    "CONCENTRATION_ITERS",
    "GAMMA_PRIOR",
    "HDP",
    "TOPIC_PREFIX",
    "TOPIC_SLOT",
    "HDPConfig",
    "_BatchState",
    "is_topic",
    "live_clusters",
    "resample_dp_concentration",
    "resample_group_concentration",
    "resample_py_concentration",
    "resample_top_concentration",
    "topic_token",
    "topic_uid",
]
