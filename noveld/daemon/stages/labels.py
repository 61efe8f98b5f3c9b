"""Known labels (``model.use_labels``): each label's cluster uid, the batch's label clashes,
and the known category nearest a new cluster."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import numpy as np

from noveld.models.suffstats import MultinomialStats
from noveld.schema import DecodedDocument
from noveld.state.base import KNOWN_LABEL_SLOT


def label_uid(label: str) -> int:
    """The cluster uid of a known label: a deterministic 40-bit hash in its own uid slot, so
    every replica and every restart agrees without coordination."""
    digest = hashlib.blake2b(label.encode(), digest_size=5).digest()
    return (KNOWN_LABEL_SLOT << 40) | int.from_bytes(digest, "big")


def label_collision(
    label: str, known_labels: dict[int, str], batch_labels: dict[int, str]
) -> str | None:
    """Why a document with ``label`` is rejected — its 40-bit uid (:func:`label_uid`) is
    another known label's, and the two would silently be one category under one name — or
    None, registering the label in ``batch_labels`` (the batch's new labels)."""
    uid = label_uid(label)
    owner = known_labels.get(uid, batch_labels.get(uid))
    if owner is None:
        batch_labels[uid] = label
    elif owner != label:
        return (
            f"label {label[:64]!r} has the same 40-bit id as the known label "
            f"{owner[:64]!r} (a hash collision): the two would be one category; rename one"
        )
    return None


def known_uids(
    docs: Sequence[DecodedDocument], known_labels: dict[int, str], use_labels: bool
) -> np.ndarray | None:
    """Cluster uid of each document's known label (−1 without one), registering new labels in
    ``known_labels``; None when labels are not used or the batch has none."""
    if not use_labels or not any(d.label is not None for d in docs):
        return None
    out = np.full(len(docs), -1, dtype=np.int64)
    for i, d in enumerate(docs):
        if d.label is not None:
            uid = label_uid(d.label)
            known_labels[uid] = d.label
            out[i] = uid
    return out


def nearest_known_label(
    stats: MultinomialStats, known_labels: dict[int, str], uid: int
) -> str | None:
    """The known category whose word distribution is closest (cosine) to cluster ``uid``."""
    if not known_labels:
        return None
    kmax = stats.kmax
    slot_of = {int(u): k for k, u in enumerate(stats.uid[:kmax].tolist()) if stats.alive[k]}
    own = stats.slot_of(uid, retired_too=True)  # born and evicted in one step: still there
    if own < 0:
        return None
    ws, cs = stats.word_counts(own)
    v = dict(zip(ws.tolist(), cs.tolist(), strict=True))
    nv = math.sqrt(sum(c * c for c in v.values())) or 1.0
    best, best_sim = None, 0.0
    for kuid, label in known_labels.items():
        if kuid not in slot_of:
            continue
        kw, kc = stats.word_counts(slot_of[kuid])
        dot = sum(c * v.get(w, 0.0) for w, c in zip(kw.tolist(), kc.tolist(), strict=True))
        sim = dot / (nv * (math.sqrt(float((kc * kc).sum())) or 1.0))
        if sim > best_sim:
            best, best_sim = label, sim
    return best
