"""How far can one-pass seating go with this likelihood? Seat every document, in stream order,
against a *perfect* history: the true stories of all earlier documents (MAP over them and a new
cluster under the CRP × Dirichlet–multinomial predictive, paper 004 eq. 4, words treated as
distinct draws). The NMI of those decisions bounds what committed per-batch labels can reach
when the only evidence is word counts.

    python benchmarks/ceiling_perfect_history.py [--data FILE] [--beta 0.01] [--alpha 7.68]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DEFAULT_DATA, load_texts, machine

from noveld.eval.metrics import clustering_scores
from noveld.featurize import Tokenizer, Vocabulary


def ceiling(texts: list[str], labels: list[str], beta: float, alpha: float) -> float:
    """NMI of MAP seating against the true partition of the documents before each one."""
    tok, vocab = Tokenizer(), Vocabulary()
    docs = [np.array(vocab.ids(tok.tokenize(t)), dtype=np.int64) for t in texts]
    index = {lab: i for i, lab in enumerate(dict.fromkeys(labels))}
    truth = np.array([index[lab] for lab in labels])
    n_words = len(vocab)
    counts = np.zeros((len(index), n_words))
    tokens = np.zeros(len(index))
    mass = np.zeros(len(index))
    preds: list[int] = []
    next_new = len(index)
    for i, words in enumerate(docs):
        live = np.flatnonzero(mass > 0)
        best, best_k = -math.inf, -1
        if live.shape[0]:
            p = (counts[np.ix_(live, words)] + beta) / (tokens[live, None] + n_words * beta)
            lp = np.log(mass[live]) + np.log(p).sum(axis=1)
            j = int(np.argmax(lp))
            best, best_k = float(lp[j]), int(live[j])
        new = math.log(alpha) + words.shape[0] * math.log(1.0 / n_words)
        if best > new:
            preds.append(best_k)
        else:
            preds.append(next_new)
            next_new += 1
        k = truth[i]
        np.add.at(counts[k], words, 1.0)
        tokens[k] += words.shape[0]
        mass[k] += 1
    return float(clustering_scores(labels, preds)["nmi"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--beta", type=float, default=0.01)
    p.add_argument("--alpha", type=float, default=0.03 * 256, help="new-cluster weight")
    a = p.parse_args()
    rows = load_texts(a.data)
    nmi = ceiling([str(r["text"]) for r in rows], [str(r["label"]) for r in rows], a.beta, a.alpha)
    print(f"machine: {machine()}")
    print(f"{a.data.name}: NMI of seating against the true history {nmi:.4f} (β={a.beta})")


if __name__ == "__main__":
    main()
