"""How far can one-pass seating go on words × vectors? Seat every document, in stream order,
against a *perfect* history (the true stories of all earlier documents), MAP over them and a
new cluster under the CRP × multinomial predictive of the words (as
``ceiling_perfect_history.py`` does) × (the collapsed vMF predictive of the text's unit
vector)^w: the bound on what committed per-document labels can reach with this evidence.

    python benchmarks/ceiling_hybrid.py [--data FILE] [--weights 0 0.25 0.5 1]
                                        [--cosines 0.4 0.5] [--dim 256] [--alpha 7.68]
                                        [--tempering 15]
    python benchmarks/ceiling_hybrid.py --known-fraction 0.4 [--leave-one-out]

The vectors are the built-in encoder's (:class:`~noveld.featurize.encoder.StaticVectors`);
w = 0 is the words' own ceiling. ``--tempering s`` raises each document's words predictive to
the power τ = (1 + s)/(n + s) as the hybrid model does (its default s is 15; 0: untempered).
With ``--known-fraction`` the seating is scored under ``noveld evaluate --known-fraction``'s
protocol (the revealed documents sit in their class; ``known_f1`` and NMI on the others), as
``ceiling_perfect_history.py --known-fraction`` does for the words; with ``--leave-one-out``
every document is instead classified by the same predictive trained on *all* other documents
with their labels, past and future (a words × vMF naive Bayes; fully supervised, no new
clusters).
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
from noveld.eval.novelty import known_f1, split_known
from noveld.featurize.encoder import StaticVectors
from noveld.models.kernels import vmf as vkern
from noveld.models.kernels.tempering import document_tempering


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
    revealed: np.ndarray | None = None,
    tempering: float = 0.0,
) -> list[int]:
    """MAP seating of each document against the true partition of the documents before it
    (revealed documents are placed in their class); the seatings (class index, or a fresh index
    for a new cluster)."""
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
        k = int(truth[i])
        if revealed is not None and revealed[i]:
            preds.append(k)
            add_member(counts, tokens, mass, res, k, words, x)
            continue
        tau = document_tempering(float(words.shape[0]), tempering)
        live = np.flatnonzero(mass > 0)
        best, best_k = -math.inf, -1
        new = math.log(alpha) + tau * words.shape[0] * math.log(1.0 / n_words)
        if weight and has_vector[i]:
            new += weight * logc_zero
        if live.shape[0]:
            q = (counts[np.ix_(live, words)] + beta) / (tokens[live, None] + n_words * beta)
            lp = np.log(mass[live]) + tau * np.log(q).sum(axis=1)
            if weight and has_vector[i]:
                r = res[live]
                before = log_normalizers(p, kappa * np.linalg.norm(r, axis=1))
                after = log_normalizers(p, kappa * np.linalg.norm(r + x, axis=1))
                lp += weight * (logc_kappa + before - after)
            j = int(np.argmax(lp))
            best, best_k = float(lp[j]), int(live[j])
        preds.append(best_k if best > new else next_new)
        next_new += int(preds[-1] == next_new)
        add_member(counts, tokens, mass, res, k, words, x)
    return preds


def add_member(
    counts: np.ndarray,
    tokens: np.ndarray,
    mass: np.ndarray,
    res: np.ndarray,
    k: int,
    words: np.ndarray,
    x: np.ndarray,
) -> None:
    """Count a document (word ids, vector) in class ``k``."""
    np.add.at(counts[k], words, 1.0)
    tokens[k] += words.shape[0]
    mass[k] += 1
    res[k] += x


def leave_one_out(
    texts: list[str],
    labels: list[str],
    vectors: np.ndarray,
    has_vector: np.ndarray,
    beta: float,
    kappa: float,
    weight: float,
    tempering: float = 0.0,
) -> list[int]:
    """Each document's MAP class under the hybrid predictive (class prior ∝ size, the
    Dirichlet–multinomial of its words^τ × the collapsed vMF of its vector^w) with every
    other document counted in its class."""
    docs, truth, n_classes, n_words = featurized(texts, labels)
    p = vectors.shape[1]
    counts = np.zeros((n_classes, n_words))
    tokens = np.zeros(n_classes)
    mass = np.zeros(n_classes)
    res = np.zeros((n_classes, p))
    for i, words in enumerate(docs):
        add_member(counts, tokens, mass, res, int(truth[i]), words, vectors[i])
    logc_kappa = vkern.log_vmf_normalizer(p, kappa)
    preds = []
    for i, words in enumerate(docs):
        k, x = int(truth[i]), vectors[i]
        c = counts[:, words].copy()
        u, n = np.unique(words, return_counts=True)
        c[k] -= n[np.searchsorted(u, words)]  # the document itself out of its class
        t, m, r = tokens.copy(), mass.copy(), res.copy()
        t[k] -= words.shape[0]
        m[k] -= 1
        r[k] -= x
        tau = document_tempering(float(words.shape[0]), tempering)
        q = (c + beta) / (t[:, None] + n_words * beta)
        lp = np.log(np.maximum(m, 1e-300)) + tau * np.log(q).sum(axis=1)
        if weight and has_vector[i]:
            before = log_normalizers(p, kappa * np.linalg.norm(r, axis=1))
            after = log_normalizers(p, kappa * np.linalg.norm(r + x, axis=1))
            lp += weight * (logc_kappa + before - after)
        preds.append(int(np.argmax(lp)))
    return preds


def protocol_scores(
    labels: list[str], preds: list[int], known: set[str], revealed: np.ndarray
) -> tuple[float, float]:
    """known_f1 and NMI on the unrevealed documents, a class index standing for its label."""
    classes = list(dict.fromkeys(labels))
    hidden = np.flatnonzero(~revealed)
    true = [labels[i] for i in hidden]
    pred = [preds[i] for i in hidden]
    as_label = [classes[q] if q < len(classes) and classes[q] in known else None for q in pred]
    return (
        known_f1(true, as_label, known, [True] * len(true)),
        clustering_scores(true, pred)["nmi"],
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    add_data_option(p)
    p.add_argument("--beta", type=float, default=0.01)
    p.add_argument("--alpha", type=float, default=0.03 * 256, help="new-cluster weight")
    p.add_argument("--weights", type=float, nargs="+", default=[0.0, 0.25, 0.5, 1.0])
    p.add_argument("--cosines", type=float, nargs="+", default=[0.4, 0.5])
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--tempering", type=float, default=0.0, help="s of the words' tempering")
    p.add_argument("--known-fraction", type=float, default=None)
    p.add_argument("--known-seed", type=int, default=0)
    p.add_argument("--leave-one-out", action="store_true", help="supervised words × vMF bound")
    a = p.parse_args()
    if a.leave_one_out and a.known_fraction is None:
        p.error("--leave-one-out is scored under --known-fraction's protocol")
    rows = load_texts(a.data)
    texts = [str(r["text"]) for r in rows]
    labels = [str(r["label"]) for r in rows]
    vectors, has = StaticVectors(a.dim).encode(texts)
    vectors[~has] = 0.0
    known, revealed = (
        split_known(labels, a.known_fraction, a.known_seed)
        if a.known_fraction is not None
        else (set(), None)
    )
    what = "leave-one-out words × vMF" if a.leave_one_out else "seating against the true history"
    print(f"machine: {machine()}")
    for c in a.cosines:
        kappa = vkern.kappa_from_cosine(c, a.dim)
        for w in a.weights:
            if w == 0 and c != a.cosines[0]:
                continue
            view = "words only" if w == 0 else f"w {w}, cos {c} (κ {kappa:.0f})"
            args = (texts, labels, vectors, has, a.beta)
            if a.leave_one_out:
                preds = leave_one_out(*args, kappa, w, a.tempering)
            else:
                preds = ceiling(*args, a.alpha, kappa, w, revealed, a.tempering)
            where = f"β={a.beta}, α={a.alpha}, p={a.dim}, s={a.tempering}"
            if revealed is None:
                nmi = clustering_scores(labels, preds)["nmi"]
                print(f"{a.data.name}: NMI of {what}, {view}: {nmi:.4f} ({where})")
                continue
            f1, nmi = protocol_scores(labels, preds, known, revealed)
            print(
                f"{a.data.name}, known fraction {a.known_fraction}, {what}, {view}: known_f1 "
                f"{f1:.4f}, NMI on the unrevealed documents {nmi:.4f} ({where})"
            )


if __name__ == "__main__":
    main()
