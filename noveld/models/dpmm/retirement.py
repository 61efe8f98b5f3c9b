"""Retirement of clusters: the faded ones (forgetting) and the lightest beyond the cap."""

from __future__ import annotations

from collections.abc import Collection

import numpy as np

from noveld.models.suffstats import MultinomialStats


def retire_clusters(
    stats: MultinomialStats,
    pinned: Collection[int],
    retire_min_mass: float,
    max_active_clusters: int,
) -> list[tuple[int, float, str]]:
    """Retire faded clusters (mass < ``retire_min_mass``) and evict the lightest beyond
    ``max_active_clusters``, never a ``pinned`` one; returns (uid, remaining mass, "faded" |
    "evicted")."""
    slots = stats.active_slots()
    if pinned:
        slots = slots[~np.isin(stats.uid[slots], np.fromiter(pinned, dtype=np.int64))]
    mass = stats.mass(slots)
    old = ~stats.fresh[slots]
    faded = slots[old & (mass < retire_min_mass)]
    keep = slots[~np.isin(slots, faded)]
    excess = keep.shape[0] - max_active_clusters
    keep = keep[~stats.fresh[keep]]  # never evict a cluster this batch just filled
    evicted = keep[np.lexsort((keep, stats.mass(keep)))[:excess]] if excess > 0 else keep[:0]
    out = [(int(stats.uid[k]), float(stats.mass(np.array([k]))[0]), "faded") for k in faded]
    out += [(int(stats.uid[k]), float(stats.mass(np.array([k]))[0]), "evicted") for k in evicted]
    if out:
        stats.retire(np.concatenate([faded, evicted]))
    return out
