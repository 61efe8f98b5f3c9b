"""When to choose ``--likelihood edcm``: both word likelihoods on a stream of long, *bursty*
documents, where a word that appears once in a document tends to appear again.

    python benchmarks/bursty_stream.py [--docs 4000] [--stories 40] [--length 120]
                                       [--burstiness 0.5 5 1000] [--seed 0] [--out FILE]

Each story has a word distribution φ (a Dirichlet around a shared Zipf-like base, with
story-specific words); stories are born over the stream. A document of story k draws its own
θ_d ~ Dirichlet(b·φ_k) and then its words from θ_d: the Dirichlet compound multinomial that
the EDCM approximates (paper 002 §2). A small burstiness ``b`` makes documents repeat a few
words many times; a large one makes them plain multinomial draws from φ_k. The script writes
each stream to a temporary file and runs ``noveld evaluate`` (the real pipeline, defaults) with
the multinomial and the EDCM likelihood, printing NMI and novelty for each. ``--out FILE``
writes the stream of the first burstiness to FILE instead (a long-document stream for the
other benchmarks' ``--data``) and evaluates nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine

from noveld.daemon.evaluate import evaluate_file
from noveld.daemon.settings import load_settings


def bursty_stream(
    docs: int, stories: int, length: int, burstiness: float, vocab: int, seed: int
) -> list[dict[str, object]]:
    """Labelled documents of the process in the module docstring, in stream order."""
    rng = np.random.default_rng(seed)
    base = 1.0 / np.arange(1, vocab + 1) ** 1.1
    base /= base.sum()
    phis = []
    for _ in range(stories):
        own = rng.choice(vocab, 40, replace=False)
        mean = 0.5 * base
        mean[own] += 0.5 / own.shape[0]
        phis.append(rng.dirichlet(200.0 * mean))
    births = np.sort(rng.choice(np.arange(1, docs), stories - 1, replace=False))
    out = []
    live = 1
    for d in range(docs):
        while live < stories and births[live - 1] <= d:
            live += 1
        k = int(rng.integers(0, live)) if rng.random() > 0.3 else live - 1  # the newest is hot
        theta = rng.dirichlet(burstiness * phis[k] + 1e-9)
        n = max(int(rng.poisson(length)), 1)
        words = rng.choice(vocab, n, p=theta)
        out.append({"id": f"d{d}", "tokens": [f"w{w}" for w in words], "label": f"s{k}"})
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--docs", type=int, default=4000)
    p.add_argument("--stories", type=int, default=40)
    p.add_argument("--length", type=int, default=120, help="mean document length (Poisson)")
    p.add_argument("--vocab", type=int, default=5000)
    p.add_argument("--burstiness", type=float, nargs="+", default=[0.5, 5.0, 1000.0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, help="write the stream of the first burstiness here")
    a = p.parse_args()
    if a.out is not None:
        rows = bursty_stream(a.docs, a.stories, a.length, a.burstiness[0], a.vocab, a.seed)
        a.out.write_text("".join(json.dumps(r) + "\n" for r in rows))
        print(f"wrote {len(rows):,} documents (burstiness {a.burstiness[0]:g}) to {a.out}")
        return
    print(f"machine: {machine()}")
    print(f"{a.docs} docs, {a.stories} stories, mean length {a.length}, vocabulary {a.vocab}")
    for b in a.burstiness:
        rows = bursty_stream(a.docs, a.stories, a.length, b, a.vocab, a.seed)
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as fh:
            fh.write("".join(json.dumps(r) + "\n" for r in rows))
            path = fh.name
        for likelihood in ("multinomial", "edcm"):
            settings = load_settings(None, {"model": {"likelihood": likelihood}})
            r = evaluate_file(settings, path)
            print(
                f"burstiness {b:>7g}  {likelihood:>11}: NMI {r['nmi']:.3f}  clusters "
                f"{r['clusters']:>4}  novelty P/R {r['novelty_precision']:.2f}/"
                f"{r['novelty_recall']:.2f}  {r['docs_per_second']:,.0f} docs/s"
            )
        Path(path).unlink()


if __name__ == "__main__":
    main()
