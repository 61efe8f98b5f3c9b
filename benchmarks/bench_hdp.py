"""First measurements of the experimental hdp sampler (not wired into the daemon; issue #4).

    python benchmarks/bench_hdp.py [--data FILE] [--topics 50] [--zeta 0.1] [--gamma 1]
                                   [--alpha 1] [--sweeps 2] [--deterministic]

Tokenizes the labelled file, runs ``HDP.partial_fit`` over batches of 256 in stream order and
prints NMI of the document categories and model-only docs/s.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DEFAULT_DATA, machine

from noveld.eval.metrics import clustering_scores
from noveld.featurize import Tokenizer, Vocabulary
from noveld.models.hdp import HDP, HDPConfig


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--topics", type=int, default=50)
    p.add_argument("--zeta", type=float, default=0.1)
    p.add_argument("--gamma", type=float, default=1.0)
    p.add_argument("--alpha", type=float, default=1.0)
    p.add_argument("--sweeps", type=int, default=2)
    p.add_argument("--deterministic", action="store_true")
    a = p.parse_args()
    rows = [json.loads(line) for line in a.data.read_text().splitlines() if line.strip()]
    tok, vocab = Tokenizer(), Vocabulary()
    docs = [np.array(vocab.ids(tok.tokenize(str(r["text"]))), dtype=np.int64) for r in rows]
    keep = [i for i, d in enumerate(docs) if len(d)]
    cfg = HDPConfig(a.topics, zeta=a.zeta, gamma=a.gamma, alpha=a.alpha, sweeps=a.sweeps,
                    deterministic=a.deterministic)  # fmt: skip
    model = HDP(cfg)
    state = model.new_state()
    rng = np.random.default_rng(0)
    out: list[int] = []
    seconds = 0.0
    for i in range(0, len(keep), 256):
        batch = [docs[j] for j in keep[i : i + 256]]
        t0 = time.perf_counter()
        out += model.partial_fit(batch, len(vocab), state, rng).tolist()
        seconds += time.perf_counter() - t0
    nmi = clustering_scores([str(rows[j]["label"]) for j in keep], out)["nmi"]
    print(f"machine: {machine()}")
    rate = len(out) / seconds
    print(f"{a.data.name} {cfg}: NMI {nmi:.4f}, categories {len(set(out))}, {rate:,.0f} docs/s")


if __name__ == "__main__":
    main()
