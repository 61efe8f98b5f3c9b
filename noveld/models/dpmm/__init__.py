"""Collapsed Dirichlet-process mixture of multinomials (``dpmm``): CRP seating + batch Gibbs
rejuvenation, and the delta replay every multinomial-pool model shares."""

from noveld.models.dpmm.model import (
    DPMM,
    SPLIT_ROUNDS,
    AlphaScaling,
    DPMMConfig,
    UncountedWords,
    absorption_gains,
    advance_documents,
    apply_additions,
    decay_factor,
    ensure_clusters,
    finish_delta,
    greedy_absorptions,
    move_counts,
    no_uncounted_words,
    replay_delta,
    warm_up,
)

__all__ = [
    "DPMM",
    "SPLIT_ROUNDS",
    "AlphaScaling",
    "DPMMConfig",
    "UncountedWords",
    "absorption_gains",
    "advance_documents",
    "apply_additions",
    "decay_factor",
    "ensure_clusters",
    "finish_delta",
    "greedy_absorptions",
    "move_counts",
    "no_uncounted_words",
    "replay_delta",
    "warm_up",
]
