"""How far can one-pass seating go on words × vectors? Seat every document, in stream order,
against a *perfect* history (the true stories of all earlier documents), MAP over them and a
new cluster under the CRP × multinomial predictive of the words (as
``ceiling_perfect_history.py`` does) × (the collapsed vMF predictive of the text's unit
vector)^w: the bound on what committed per-document labels can reach with this evidence.

    python benchmarks/ceiling_hybrid.py [--data FILE] [--weights 0 0.25 0.5 1]
                                        [--cosines 0.4 0.5] [--dim 256] [--alpha 7.68]

The vectors are the built-in encoder's (:class:`~noveld.featurize.encoder.StaticVectors`);
w = 0 is the words' own ceiling.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from numba import njit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import add_data_option, load_texts, machine
from ceiling_perfect_history import featurized

from noveld.eval.metrics import clustering_scores
from noveld.featurize.encoder import StaticVectors
from noveld.models.kernels import vmf as vkern


@njit(cache=True)
def log_normalizers(p: int, kappa_r: np.ndarray) -> np.ndarray:
    """``log C_p`` at every entry of ``kappa_r``."""
    out = np.empty(kappa_r.shape[0])
    for i in range(kappa_r.shape[0]):
        out[i] = vkern.log_vmf_normalizer(p, kappa_r[i])
    return out


def ceiling(
    texts: list[str],
    labels: list[str],
    vectors: np.ndarray,
    has_vector: np.ndarray,
    beta: float,
    alpha: float,
    kappa: float,
    weight: float,
) -> list[int]:
    """MAP seating of each document against the true partition of the documents before it;
    the seatings (class index, or a fresh index for a new cluster)."""
    docs, truth, n_classes, n_words = featurized(texts, labels)
    p = vectors.shape[1]
    counts = np.zeros((n_classes, n_words))
    tokens = np.zeros(n_classes)
    mass = np.zeros(n_classes)
    res = np.zeros((n_classes, p))
    logc_kappa = vkern.log_vmf_normalizer(p, kappa)
    logc_zero = vkern.log_sphere_density_at_zero(p)
    preds: list[int] = []
    next_new = n_classes
    for i, words in enumerate(docs):
        x = vectors[i]
        live = np.flatnonzero(mass > 0)
        best, best_k = -math.inf, -1
        new = math.log(alpha) + words.shape[0] * math.log(1.0 / n_words)
        if weight and has_vector[i]:
            new += weight * logc_zero
        if live.shape[0]:
            q = (counts[np.ix_(live, words)] + beta) / (tokens[live, None] + n_words * beta)
            lp = np.log(mass[live]) + np.log(q).sum(axis=1)
            if weight and has_vector[i]:
                r = res[live]
                before = log_normalizers(p, kappa * np.linalg.norm(r, axis=1))
                after = log_normalizers(p, kappa * np.linalg.norm(r + x, axis=1))
                lp += weight * (logc_kappa + before - after)
            j = int(np.argmax(lp))
            best, best_k = float(lp[j]), int(live[j])
        preds.append(best_k if best > new else next_new)
        next_new += int(preds[-1] == next_new)
        k = int(truth[i])
        np.add.at(counts[k], words, 1.0)
        tokens[k] += words.shape[0]
        mass[k] += 1
        res[k] += x
    return preds


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    add_data_option(p)
    p.add_argument("--beta", type=float, default=0.01)
    p.add_argument("--alpha", type=float, default=0.03 * 256, help="new-cluster weight")
    p.add_argument("--weights", type=float, nargs="+", default=[0.0, 0.25, 0.5, 1.0])
    p.add_argument("--cosines", type=float, nargs="+", default=[0.4, 0.5])
    p.add_argument("--dim", type=int, default=256)
    a = p.parse_args()
    rows = load_texts(a.data)
    texts = [str(r["text"]) for r in rows]
    labels = [str(r["label"]) for r in rows]
    vectors, has = StaticVectors(a.dim).encode(texts)
    vectors[~has] = 0.0
    print(f"machine: {machine()}")
    for c in a.cosines:
        kappa = vkern.kappa_from_cosine(c, a.dim)
        for w in a.weights:
            if w == 0 and c != a.cosines[0]:
                continue
            preds = ceiling(texts, labels, vectors, has, a.beta, a.alpha, kappa, w)
            nmi = clustering_scores(labels, preds)["nmi"]
            view = "words only" if w == 0 else f"w {w}, cos {c} (κ {kappa:.0f})"
            print(f"{a.data.name}: NMI of seating against the true history, {view}: {nmi:.4f} "
                  f"(β={a.beta}, α={a.alpha}, p={a.dim})")  # fmt: skip


if __name__ == "__main__":
    main()
