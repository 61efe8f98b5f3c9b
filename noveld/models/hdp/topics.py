"""How the ``hdp`` model's topics live in the shared cluster pool: their fixed uids, their
reserved vocabulary entries, and telling them apart from categories."""

from __future__ import annotations

import numpy as np

from noveld.models.suffstats import MultinomialStats
from noveld.models.vocabulary import RESERVED_PREFIX

TOPIC_SLOT = (1 << 20) - 2  # uid slot of topics (known labels use 2^20 − 1)
TOPIC_PREFIX = RESERVED_PREFIX + "topic/"  # vocabulary entries no input token can be


def topic_uid(topic: int) -> int:
    """Cluster uid of topic ``topic``: fixed, so every replica and restart agrees."""
    return (TOPIC_SLOT << 40) | topic


def topic_token(topic: int) -> str:
    """The reserved vocabulary entry standing for topic ``topic`` in category–topic counts."""
    return f"{TOPIC_PREFIX}{topic}"


def is_topic(uids: np.ndarray) -> np.ndarray:
    """Which of ``uids`` are topics."""
    mask: np.ndarray = (uids >> 40) == TOPIC_SLOT
    return mask


def live_clusters(stats: MultinomialStats) -> int:
    """Live clusters of any model, hdp's topics left out (they are not categories: progress,
    ``noveld_clusters_active`` and ``state show`` count what ``max_active_clusters`` bounds)."""
    k = stats.kmax
    return int((stats.alive[:k] & ~is_topic(stats.uid[:k])).sum())
