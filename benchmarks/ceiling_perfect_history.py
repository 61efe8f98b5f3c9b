"""How far can one-pass seating go with this likelihood? Seat every document, in stream order,
against a *perfect* history: the true stories of all earlier documents (MAP over them and a new
cluster under the CRP × Dirichlet–multinomial predictive, paper 004 eq. 4, words treated as
distinct draws). The NMI of those decisions bounds what committed per-batch labels can reach
when the only evidence is word counts.

    python benchmarks/ceiling_perfect_history.py [--data FILE] [--beta 0.01] [--alpha 7.68]
    python benchmarks/ceiling_perfect_history.py --known-fraction 0.4   # paper 000's protocol
    python benchmarks/ceiling_perfect_history.py --known-fraction 0.4 --leave-one-out
    python benchmarks/ceiling_perfect_history.py --likelihood edcm [--edcm-prior 0.001]
                                                 [--edcm-prior-docs 5]
    python benchmarks/ceiling_perfect_history.py --prior-strength 300 [--prior-smoothing 2]
    python benchmarks/ceiling_perfect_history.py --lag 256   # decisions that may wait L documents
    python benchmarks/ceiling_perfect_history.py --translation 0.1 [--neighbours 500]
    python benchmarks/ceiling_perfect_history.py --likelihood tfidf [--threshold 0.1]

With ``--known-fraction`` the same seating is scored as ``noveld evaluate --known-fraction``
scores a model (the revealed documents sit in their class; ``known_f1`` and NMI on the others):
the bound on what any seating by this likelihood can reach under that protocol. With
``--leave-one-out`` every document is instead classified by multinomial naive Bayes trained on
*all* other documents with their labels, past and future — fully supervised, far more than any
stream gives; no new clusters. With ``--likelihood edcm`` the seating uses the EDCM predictive
of ``--likelihood edcm`` (paper 002 eq. 2, the smoothed fixed point of
:mod:`noveld.models.kernels.edcm`) instead. With ``--prior-strength b`` the clusters' word
distributions are drawn around the stream's word frequencies so far instead of a symmetric
Dirichlet (a hierarchical prior, ``β_w = b·p̂(w)`` with ``p̂`` smoothed by
``--prior-smoothing`` pseudo-counts per word); a new cluster is then scored by ``p̂`` itself.
With ``--lag L`` each document is seated against the true stories of every other document up to
``L`` positions after it: the bound for a stream whose labels may wait ``L`` documents (a
within-batch Gibbs sweep, or a fixed-lag re-seating, sees at most that much of the future).
With ``--translation λ`` a cluster also predicts the words that co-occur with its words
(a translation model, ``p(w|k) = (1−λ)·p̂(w|k) + λ·Σ_u T(w|u)·p̂(u|k)`` with ``T(w|u)`` the
co-occurrence of w with u within documents, u's ``--neighbours`` most frequent partners): evidence
beyond a document's own words, taken from the *whole file* (the future included), so an upper
bound for any co-occurrence smoothing a stream could learn. With ``--likelihood tfidf`` the
seating is the classic first-story-detection rule instead (nearest TF-IDF centroid by cosine, a
new story below ``--threshold``): is the ceiling the likelihood's, or the words'?
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import add_data_option, load_texts, machine

from noveld.eval.metrics import clustering_scores
from noveld.eval.novelty import known_f1, split_known
from noveld.featurize import Tokenizer
from noveld.models.kernels import edcm as ekern
from noveld.models.vocabulary import Vocabulary


def featurized(
    texts: list[str], labels: list[str]
) -> tuple[list[np.ndarray], np.ndarray, int, int]:
    """Word ids of each text, class index of each label, number of classes, vocabulary size."""
    tok, vocab = Tokenizer(), Vocabulary()
    docs = [np.array(vocab.ids(tok.tokenize(t)), dtype=np.int64) for t in texts]
    index = {lab: i for i, lab in enumerate(dict.fromkeys(labels))}
    return docs, np.array([index[lab] for lab in labels]), len(index), len(vocab)


def ceiling(
    texts: list[str],
    labels: list[str],
    beta: float,
    alpha: float,
    revealed: np.ndarray | None = None,
    strength: float = 0.0,
    smoothing: float = 0.5,
) -> list[int]:
    """MAP seating of each document against the true partition of the documents before it
    (revealed documents are placed in their class); returns the seatings (class index, or a
    fresh index for a new cluster)."""
    docs, truth, n_classes, n_words = featurized(texts, labels)
    counts = np.zeros((n_classes, n_words))
    tokens = np.zeros(n_classes)
    mass = np.zeros(n_classes)
    seen = np.zeros(n_words)  # word counts of all earlier documents (hierarchical prior)
    preds: list[int] = []
    next_new = n_classes
    for i, words in enumerate(docs):
        k = int(truth[i])
        if revealed is not None and revealed[i]:
            preds.append(k)
        elif strength > 0:
            phi = (seen[words] + smoothing) / (seen.sum() + smoothing * n_words)
            preds.append(seat_hierarchical(words, phi, counts, tokens, mass, strength, alpha))
            preds[-1] = next_new if preds[-1] < 0 else preds[-1]
            next_new += int(preds[-1] == next_new)
        else:
            preds.append(seat(words, counts, tokens, mass, beta, alpha, n_words, next_new))
            next_new += int(preds[-1] == next_new)
        np.add.at(counts[k], words, 1.0)
        np.add.at(seen, words, 1.0)
        tokens[k] += words.shape[0]
        mass[k] += 1
    return preds


def lagged_ceiling(
    texts: list[str], labels: list[str], beta: float, alpha: float, lag: int
) -> list[int]:
    """:func:`ceiling` where document ``i`` also sees the true stories of documents
    ``i+1 … i+lag`` (itself left out)."""
    docs, truth, n_classes, n_words = featurized(texts, labels)
    counts = np.zeros((n_classes, n_words))
    tokens = np.zeros(n_classes)
    mass = np.zeros(n_classes)

    def add(j: int, sign: float) -> None:
        k = int(truth[j])
        np.add.at(counts[k], docs[j], sign)
        tokens[k] += sign * docs[j].shape[0]
        mass[k] += sign

    preds: list[int] = []
    next_new, added = n_classes, 0
    for i, words in enumerate(docs):
        while added < min(len(docs), i + lag + 1):
            add(added, 1.0)
            added += 1
        add(i, -1.0)
        preds.append(seat(words, counts, tokens, mass, beta, alpha, n_words, next_new))
        next_new += int(preds[-1] == next_new)
        add(i, 1.0)
    return preds


def cooccurrence(docs: list[np.ndarray], n_words: int, neighbours: int) -> Any:
    """Row-stochastic ``T[u, w] = P(w | u)`` from the documents' within-document word pairs,
    each row cut to its ``neighbours`` most frequent partners (a word with none predicts itself);
    a scipy CSR matrix."""
    import scipy.sparse as sp

    pairs = [np.stack(np.meshgrid(u, u), -1).reshape(-1, 2) for u in map(np.unique, docs)]
    both = np.concatenate(pairs)
    both = both[both[:, 0] != both[:, 1]]
    co = sp.csr_matrix((np.ones(both.shape[0]), (both[:, 0], both[:, 1])), shape=(n_words, n_words))
    co.sum_duplicates()
    rows, cols, vals = [], [], []
    for u in range(n_words):
        lo, hi = co.indptr[u], co.indptr[u + 1]
        if lo == hi:
            rows.append(np.array([u]))
            cols.append(np.array([u]))
            vals.append(np.ones(1))
            continue
        top = np.argsort(-co.data[lo:hi], kind="stable")[:neighbours]
        v = co.data[lo:hi][top]
        rows.append(np.full(top.shape[0], u))
        cols.append(co.indices[lo:hi][top])
        vals.append(v / v.sum())
    return sp.csr_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
        shape=(n_words, n_words),
    )


def translated_ceiling(
    texts: list[str], labels: list[str], beta: float, alpha: float, lam: float, neighbours: int
) -> list[int]:
    """:func:`ceiling` with each class's word distribution mixed with its co-occurrence
    translation (weight ``lam``); a new cluster is scored by the uniform distribution."""
    docs, truth, n_classes, n_words = featurized(texts, labels)
    trans = cooccurrence(docs, n_words, neighbours)
    counts = np.zeros((n_classes, n_words))
    spread = np.zeros((n_classes, n_words))  # counts @ T, kept row by row
    tokens = np.zeros(n_classes)
    mass = np.zeros(n_classes)
    preds: list[int] = []
    next_new = n_classes
    for i, words in enumerate(docs):
        live = np.flatnonzero(mass > 0)
        best, best_k = math.log(alpha) - words.shape[0] * math.log(n_words), next_new
        if live.shape[0]:
            norm = tokens[live, None] + n_words * beta
            own = (counts[np.ix_(live, words)] + beta) / norm
            near = (spread[np.ix_(live, words)] + beta) / norm
            lp = np.log(mass[live]) + np.log((1 - lam) * own + lam * near).sum(axis=1)
            j = int(np.argmax(lp))
            if lp[j] > best:
                best_k = int(live[j])
        preds.append(best_k)
        next_new += int(best_k == next_new)
        k = int(truth[i])
        u, n = np.unique(words, return_counts=True)
        np.add.at(counts[k], words, 1.0)
        spread[k] += n.astype(np.float64) @ trans[u].toarray()
        tokens[k] += words.shape[0]
        mass[k] += 1
    return preds


def seat_hierarchical(
    words: np.ndarray,
    phi: np.ndarray,
    counts: np.ndarray,
    tokens: np.ndarray,
    mass: np.ndarray,
    strength: float,
    alpha: float,
) -> int:
    """MAP over the classes with mass under ``p(w|k) = (n_kw + b·φ_w)/(n_k + b)`` and a new
    cluster under ``φ``; -1 for the new one."""
    live = np.flatnonzero(mass > 0)
    new = math.log(alpha) + float(np.log(phi).sum())
    if not live.shape[0]:
        return -1
    p = (counts[np.ix_(live, words)] + strength * phi) / (tokens[live, None] + strength)
    lp = np.log(mass[live]) + np.log(p).sum(axis=1)
    j = int(np.argmax(lp))
    return int(live[j]) if lp[j] > new else -1


def seat(
    words: np.ndarray,
    counts: np.ndarray,
    tokens: np.ndarray,
    mass: np.ndarray,
    beta: float,
    alpha: float,
    n_words: int,
    new_index: int,
) -> int:
    """MAP over the classes with mass and a new cluster (``new_index``)."""
    live = np.flatnonzero(mass > 0)
    best, best_k = -math.inf, -1
    if live.shape[0]:
        p = (counts[np.ix_(live, words)] + beta) / (tokens[live, None] + n_words * beta)
        lp = np.log(mass[live]) + np.log(p).sum(axis=1)
        j = int(np.argmax(lp))
        best, best_k = float(lp[j]), int(live[j])
    new = math.log(alpha) + words.shape[0] * math.log(1.0 / n_words)
    return best_k if best > new else new_index


def edcm_ceiling(
    texts: list[str], labels: list[str], b0: float, c: float, alpha: float
) -> list[int]:
    """:func:`ceiling` under the EDCM: MAP over ``log m_k + log EDCM(x | β_k)`` and
    ``log α + log EDCM(x | b0)`` (the terms every option shares left out)."""
    docs, truth, n_classes, n_words = featurized(texts, labels)
    lengths = ekern.bin_lengths()
    df = np.zeros((n_classes, n_words))
    hist = np.zeros((n_classes, ekern.N_BINS))
    distinct = np.zeros(n_classes)
    mass = np.zeros(n_classes)
    shape_s = np.full(n_classes, n_words * b0)
    shape_d = np.zeros(n_classes)
    s0 = n_words * b0
    preds: list[int] = []
    next_new = n_classes
    for i, doc in enumerate(docs):
        words, n, k = np.unique(doc), int(doc.shape[0]), int(truth[i])
        live = np.flatnonzero(mass > 0)
        best, best_k = -math.inf, -1
        if live.shape[0]:
            s = shape_s[live]
            rising = np.array([ekern.log_rising(x, n) for x in s.tolist()])
            lp = (
                np.log(mass[live])
                - rising
                + np.log(df[np.ix_(live, words)] + c * b0).sum(axis=1)
                - words.shape[0] * np.log(shape_d[live] + c)
            )
            j = int(np.argmax(lp))
            best, best_k = float(lp[j]), int(live[j])
        new = math.log(alpha) - ekern.log_rising(s0, n) + words.shape[0] * math.log(b0)
        preds.append(best_k if best > new else next_new)
        next_new += int(preds[-1] == next_new)
        df[k, words] += 1.0
        hist[k, ekern.length_bin(n)] += 1.0
        distinct[k] += words.shape[0]
        mass[k] += 1.0
        total = distinct[k] + c * n_words * b0
        shape_s[k], shape_d[k] = ekern.solve_shape(hist[k], lengths, 1.0, total, c, shape_s[k])
    return preds


def tfidf_ceiling(
    texts: list[str], labels: list[str], threshold: float, refresh: int = 256
) -> list[int]:
    """:func:`ceiling` under the classic first-story-detection rule instead of a likelihood:
    the story whose TF-IDF centroid is the most cosine-similar, or a new story when no
    similarity reaches ``threshold``. IDF from the documents so far, refreshed every ``refresh``
    documents (a batch)."""
    docs, truth, n_classes, n_words = featurized(texts, labels)
    counts = np.zeros((n_classes, n_words))
    df = np.zeros(n_words)
    idf2 = np.ones(n_words)  # squared IDF weights as of the last refresh
    norm2 = np.zeros(n_classes)  # squared norms of the weighted centroids under idf2
    preds: list[int] = []
    next_new = n_classes
    for i, doc in enumerate(docs):
        if i % refresh == 0:
            idf2 = (np.log((i + 1) / (df + 1)) + 1) ** 2
            norm2 = (counts**2) @ idf2
        words, n = np.unique(doc, return_counts=True)
        q = n * idf2[words]  # query weights times one idf (the other is the centroid's)
        live = np.flatnonzero(norm2 > 0)
        best_k = next_new
        if live.shape[0]:
            sims = (counts[np.ix_(live, words)] @ q) / (
                np.sqrt(norm2[live]) * math.sqrt(float((n**2 * idf2[words]).sum()))
            )
            j = int(np.argmax(sims))
            if sims[j] >= threshold:
                best_k = int(live[j])
        preds.append(best_k)
        next_new += int(best_k == next_new)
        k = int(truth[i])
        old = counts[k, words]
        norm2[k] += float((((old + n) ** 2 - old**2) * idf2[words]).sum())
        counts[k, words] = old + n
        df[words] += 1
    return preds


def leave_one_out(texts: list[str], labels: list[str], beta: float) -> list[int]:
    """Each document's MAP class under naive Bayes (the Dirichlet–multinomial predictive with
    class prior ∝ size) fitted on every other document."""
    docs, truth, n_classes, n_words = featurized(texts, labels)
    counts = np.zeros((n_classes, n_words))
    for words, k in zip(docs, truth, strict=True):
        np.add.at(counts[k], words, 1.0)
    tokens = counts.sum(axis=1)
    mass = np.bincount(truth, minlength=n_classes).astype(float)
    preds = []
    for words, k in zip(docs, truth, strict=True):
        c = counts[:, words].copy()
        u, n = np.unique(words, return_counts=True)
        c[k] -= n[np.searchsorted(u, words)]  # the document itself out of its class
        t, m = tokens.copy(), mass.copy()
        t[k] -= words.shape[0]
        m[k] -= 1
        lp = np.log(np.maximum(m, 1e-300)) + np.log((c + beta) / (t[:, None] + n_words * beta)).sum(
            1
        )
        preds.append(int(np.argmax(lp)))
    return preds


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    add_data_option(p)
    p.add_argument("--beta", type=float, default=0.01)
    p.add_argument("--alpha", type=float, default=0.03 * 256, help="new-cluster weight")
    p.add_argument("--known-fraction", type=float, default=None)
    p.add_argument("--known-seed", type=int, default=0)
    p.add_argument("--leave-one-out", action="store_true", help="supervised naive Bayes bound")
    p.add_argument("--likelihood", choices=["multinomial", "edcm", "tfidf"], default="multinomial")
    p.add_argument("--threshold", type=float, default=0.1, help="tfidf: new-story cosine")
    p.add_argument("--edcm-prior", type=float, default=0.001)
    p.add_argument("--edcm-prior-docs", type=float, default=5.0)
    p.add_argument("--prior-strength", type=float, default=0.0, help="hierarchical prior's b")
    p.add_argument("--prior-smoothing", type=float, default=0.5)
    p.add_argument("--lag", type=int, default=0, help="documents a decision may wait")
    p.add_argument("--translation", type=float, default=0.0, help="co-occurrence weight λ")
    p.add_argument("--neighbours", type=int, default=500, help="co-occurring words kept per word")
    a = p.parse_args()
    rows = load_texts(a.data)
    texts = [str(r["text"]) for r in rows]
    labels = [str(r["label"]) for r in rows]
    print(f"machine: {machine()}")
    what = "leave-one-out naive Bayes" if a.leave_one_out else "seating against the true history"
    if a.likelihood == "edcm":
        if a.known_fraction is not None or a.leave_one_out:
            p.error("--likelihood edcm measures the plain ceiling only")
        preds = edcm_ceiling(texts, labels, a.edcm_prior, a.edcm_prior_docs, a.alpha)
        nmi = clustering_scores(labels, preds)["nmi"]
        print(
            f"{a.data.name}: NMI of {what}, EDCM {nmi:.4f} (b0={a.edcm_prior}, "
            f"c={a.edcm_prior_docs}, α={a.alpha})"
        )
        return
    if a.likelihood == "tfidf":
        if a.known_fraction is not None or a.leave_one_out:
            p.error("--likelihood tfidf measures the plain ceiling only")
        preds = tfidf_ceiling(texts, labels, a.threshold)
        nmi = clustering_scores(labels, preds)["nmi"]
        print(f"{a.data.name}: NMI of {what}, TF-IDF cosine {nmi:.4f} (threshold {a.threshold})")
        return
    if a.translation > 0:
        if a.known_fraction is not None or a.leave_one_out or a.lag or a.prior_strength > 0:
            p.error("--translation measures the plain ceiling only")
        preds = translated_ceiling(texts, labels, a.beta, a.alpha, a.translation, a.neighbours)
        nmi = clustering_scores(labels, preds)["nmi"]
        print(
            f"{a.data.name}: NMI of {what}, translation λ={a.translation} ({a.neighbours} "
            f"neighbours) {nmi:.4f} (β={a.beta}, α={a.alpha})"
        )
        return
    if a.lag > 0:
        if a.known_fraction is not None or a.leave_one_out or a.prior_strength > 0:
            p.error("--lag measures the plain ceiling only")
        preds = lagged_ceiling(texts, labels, a.beta, a.alpha, a.lag)
        nmi = clustering_scores(labels, preds)["nmi"]
        print(f"{a.data.name}: NMI of {what}, lag {a.lag} {nmi:.4f} (β={a.beta}, α={a.alpha})")
        return
    if a.known_fraction is None:
        preds = (
            leave_one_out(texts, labels, a.beta)
            if a.leave_one_out
            else ceiling(texts, labels, a.beta, a.alpha, None, a.prior_strength, a.prior_smoothing)
        )
        nmi = clustering_scores(labels, preds)["nmi"]
        prior = (
            f"hierarchical b={a.prior_strength}, smoothing {a.prior_smoothing}"
            if a.prior_strength > 0
            else f"β={a.beta}"
        )
        print(f"{a.data.name}: NMI of {what} {nmi:.4f} ({prior}, α={a.alpha})")
        return
    known, revealed = split_known(labels, a.known_fraction, a.known_seed)
    preds = (
        leave_one_out(texts, labels, a.beta)
        if a.leave_one_out
        else ceiling(texts, labels, a.beta, a.alpha, revealed)
    )
    classes = list(dict.fromkeys(labels))
    hidden = np.flatnonzero(~revealed)
    true = [labels[i] for i in hidden]
    pred = [preds[i] for i in hidden]
    as_label = [classes[p] if p < len(classes) and classes[p] in known else None for p in pred]
    f1 = known_f1(true, as_label, known, [True] * len(true))
    nmi = clustering_scores(true, pred)["nmi"]
    print(
        f"{a.data.name}, known fraction {a.known_fraction}, {what}: known_f1 {f1:.4f}, NMI on "
        f"the unrevealed documents {nmi:.4f} (β={a.beta})"
    )


if __name__ == "__main__":
    main()
