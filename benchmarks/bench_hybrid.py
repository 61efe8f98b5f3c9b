"""Speed of the ``dpmm`` model step: the words model against the hybrid (words × vectors), both
at their defaults, one pass of ``partial_fit`` over a labelled stream in batches of 256.

    python benchmarks/bench_hybrid.py [--data FILE] [--rounds 5] [--dim 256] [--uniform-prior]

Texts are featurized and encoded up front (not timed). The two models run A/B in alternation,
a warm-up pass each first (numba compiles), so a busy machine slows both alike; it prints each
round's docs/s (by the wall clock, and by the process's CPU time, steadier when others load
the machine) and the medians; ``--uniform-prior`` adds the hybrid under the uniform prior on a
cluster's direction (what the fitted prior costs). One BLAS thread, as ``noveld run`` should be
measured on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import add_data_option, machine
from quality_hybrid import featurized

from noveld.daemon.pipeline import model_config
from noveld.daemon.settings import load_settings
from noveld.eval.metrics import clustering_scores
from noveld.models.base import DocBatch
from noveld.models.dpmm import DPMM
from noveld.models.hybrid import HybridConfig, HybridMixture


def one_pass(model: DPMM, batches: list[DocBatch], labels: list[str]) -> tuple[float, float, float]:
    """NMI of one pass from a fresh state, its docs/s by the wall clock and by this process's
    CPU time (the steadier of the two on a shared machine)."""
    stats = model.new_state()
    preds: list[int] = []
    t0, c0 = time.perf_counter(), time.process_time()
    for i, b in enumerate(batches):
        preds += model.partial_fit(b, stats, np.random.default_rng(i)).assignments.tolist()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return clustering_scores(labels, preds)["nmi"], len(labels) / wall, len(labels) / cpu


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    add_data_option(p)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--uniform-prior", action="store_true", help="also the hybrid, uniform prior")
    a = p.parse_args()
    base = model_config(load_settings(None, {}))
    batches, labels, pos, neg, _ = featurized(Path(a.data), a.dim)
    words = DPMM(base)
    both = HybridMixture(HybridConfig(**replace(base, merge=False, split=False).__dict__,
                                      dimension=a.dim))  # fmt: skip
    both.bind_dimension_words(pos, neg)
    models: dict[str, DPMM] = {"words": words, "hybrid": both}
    if a.uniform_prior:
        flat = HybridMixture(replace(both.config, direction_prior=False))
        flat.bind_dimension_words(pos, neg)
        models["uniform"] = flat
    print(f"machine: {machine()}")
    print(f"{Path(a.data).name}: {len(labels):,} documents, batches of 256, p = {a.dim}")
    for m in models.values():
        one_pass(m, batches, labels)  # warm-up: numba's compilation and caches
    rates: dict[str, list[float]] = {name: [] for name in models}
    cpu: dict[str, list[float]] = {name: [] for name in models}
    for r in range(a.rounds):
        line = []
        for name, m in models.items():
            nmi, rate, cpu_rate = one_pass(m, batches, labels)
            rates[name].append(rate)
            cpu[name].append(cpu_rate)
            line.append(f"{name} {rate:8,.0f} docs/s ({cpu_rate:8,.0f} by CPU; NMI {nmi:.3f})")
        print(f"  round {r + 1}: " + "   ".join(line))
    for name, got in rates.items():
        print(f"{name:>8}: median {statistics.median(got):8,.0f} docs/s  "
              f"(min {min(got):,.0f}, max {max(got):,.0f}; "
              f"by CPU time median {statistics.median(cpu[name]):,.0f})")  # fmt: skip


if __name__ == "__main__":
    main()
