"""Collapsed Dirichlet-process mixture of multinomials (``dpmm``): CRP seating + batch Gibbs
rejuvenation, with the delta replay every other multinomial-pool model shares.

Pure: arrays in, arrays/deltas out; the statistics object passed in is the model's working state
and is updated in place, and the returned :class:`StatsDelta` says exactly what changed so a
durable store can apply the same change.
"""

from noveld.models.dpmm.bursts import SPLIT_ROUNDS
from noveld.models.dpmm.clusters import Move, ensure_clusters, move_counts
from noveld.models.dpmm.config import AlphaScaling, DPMMConfig, decay_factor
from noveld.models.dpmm.delta import batch_delta, births_after_merges, delta_from_entries
from noveld.models.dpmm.merges import absorption_gains, greedy_absorptions
from noveld.models.dpmm.model import DPMM, warm_up
from noveld.models.dpmm.replay import (
    UncountedWords,
    advance_documents,
    apply_additions,
    finish_delta,
    no_uncounted_words,
    replay_delta,
)
from noveld.models.dpmm.retirement import retire_clusters

__all__ = [
    "DPMM",
    "SPLIT_ROUNDS",
    "AlphaScaling",
    "DPMMConfig",
    "Move",
    "UncountedWords",
    "absorption_gains",
    "advance_documents",
    "apply_additions",
    "batch_delta",
    "births_after_merges",
    "decay_factor",
    "delta_from_entries",
    "ensure_clusters",
    "finish_delta",
    "greedy_absorptions",
    "move_counts",
    "no_uncounted_words",
    "replay_delta",
    "retire_clusters",
    "warm_up",
]
