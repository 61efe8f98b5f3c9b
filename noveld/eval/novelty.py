"""Novelty scores against ground truth, and the semi-supervised known-label protocol.

Pure functions of stream-ordered labels and emitted births: no I/O, no model. A birth is the pair
(founding document's stream index, stream index at which the ``cluster.born`` event was
confirmed). It is *correct* when its founding document is among the first ``window`` documents of
its true cluster, i.e. the model noticed the story while it was still new.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
import numpy.typing as npt


def novelty_scores(
    stream_labels: Sequence[str], births: Sequence[tuple[int, int]], window: int = 5
) -> dict[str, float]:
    """Score ``cluster.born`` births against the true labels of the stream.

    ``stream_labels[i]`` is the true label of the i-th document in stream order; each birth is
    ``(founding_doc_index, confirmed_at_index)``. Returns

    - ``novelty_precision``: qualifying births ÷ births (0.0 when there are no births), where a
      birth qualifies when its founding document is among the first ``window`` documents of its
      true cluster;
    - ``novelty_recall``: true clusters with at least one qualifying birth ÷ true clusters
      (0.0 for an empty stream);
    - ``novelty_latency_docs``: median, over detected true clusters, of the earliest
      confirmation index among the cluster's qualifying births minus the index of the cluster's
      first document (NaN when no cluster was detected);
    - ``births`` and ``true_clusters`` (counts, as floats).

    Raises ValueError for ``window < 1``, indices outside the stream, or a birth confirmed
    before its founding document.
    """
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    n = len(stream_labels)
    first: dict[str, int] = {}
    rank = np.empty(n, dtype=np.int64)  # position of each document within its true cluster
    seen: dict[str, int] = {}
    for i, lab in enumerate(stream_labels):
        k = seen.get(lab, 0)
        rank[i] = k
        seen[lab] = k + 1
        if k == 0:
            first[lab] = i

    earliest: dict[str, int] = {}  # true label → earliest confirmation among qualifying births
    qualifying = 0
    for founding, confirmed in births:
        if not (0 <= founding < n and 0 <= confirmed < n):
            raise ValueError(f"birth {(founding, confirmed)} outside the stream of {n} documents")
        if confirmed < founding:
            raise ValueError(f"birth {(founding, confirmed)} is confirmed before it was founded")
        if rank[founding] < window:
            qualifying += 1
            lab = stream_labels[founding]
            earliest[lab] = min(confirmed, earliest.get(lab, confirmed))

    latencies = [c - first[lab] for lab, c in earliest.items()]
    return {
        "novelty_precision": qualifying / len(births) if births else 0.0,
        "novelty_recall": len(earliest) / len(first) if first else 0.0,
        "novelty_latency_docs": float(np.median(latencies)) if latencies else float("nan"),
        "births": float(len(births)),
        "true_clusters": float(len(first)),
    }


def split_known(
    labels: Sequence[str], known_fraction: float, seed: int
) -> tuple[set[str], npt.NDArray[np.bool_]]:
    """Choose the known classes and the documents whose labels are revealed (paper 000 protocol).

    Half of the distinct classes (rounded down, chosen with ``seed``) are *known*; within each
    known class, ``round(known_fraction × class size)`` of its documents, chosen with ``seed``,
    have their label revealed. The other classes are novel and never revealed. Returns the known
    class set and a boolean mask over ``labels`` that is True for revealed documents.
    Deterministic for a given ``(labels, known_fraction, seed)``.
    """
    if not 0.0 <= known_fraction <= 1.0:
        raise ValueError(f"known_fraction must be in [0, 1], got {known_fraction}")
    rng = np.random.default_rng(seed)
    arr = np.asarray([str(x) for x in labels])
    classes = sorted(set(arr.tolist()))
    chosen = rng.permutation(len(classes))[: len(classes) // 2]
    known = {classes[int(i)] for i in chosen}
    mask = np.zeros(len(arr), dtype=np.bool_)
    for c in sorted(known):
        members = np.flatnonzero(arr == c)
        k = int(np.floor(known_fraction * len(members) + 0.5))
        mask[rng.choice(members, size=k, replace=False)] = True
    return known, mask


def known_f1(
    true: Sequence[str],
    pred_labels: Sequence[str | None],
    known_classes: set[str] | frozenset[str],
    mask_unrevealed: Sequence[bool] | npt.NDArray[np.bool_],
) -> float:
    """Macro F1 over the known classes, counted on the unrevealed documents only.

    ``pred_labels[i]`` is the known category the model put document i in, or None (a novel or
    unlabelled category). For each known class c, on documents with ``mask_unrevealed`` True:
    F1 = 2·TP / (2·TP + FP + FN). Classes with no such document and no such prediction have an
    undefined F1 and are left out of the average; NaN when every class is left out.
    """
    mask = np.asarray(mask_unrevealed, dtype=np.bool_)
    if not len(true) == len(pred_labels) == len(mask):
        raise ValueError("true, pred_labels and mask_unrevealed differ in length")
    t = np.asarray([str(x) for x in true], dtype=object)[mask]
    p = np.asarray([_opt_str(x) for x in pred_labels], dtype=object)[mask]
    scores: list[float] = []
    for c in sorted(known_classes):
        is_t, is_p = t == c, p == c
        tp = int(np.sum(is_t & is_p))
        den = int(np.sum(is_t)) + int(np.sum(is_p))  # = 2·TP + FP + FN
        if den:
            scores.append(2.0 * tp / den)
    return float(np.mean(scores)) if scores else float("nan")


def _opt_str(x: Hashable | None) -> str | None:
    return None if x is None else str(x)
