"""Model-only throughput of a model step (featurization done up front, not timed).

    python benchmarks/bench_model.py [--data FILE] [--repeat 3] [--model dpmm|svi]
    python benchmarks/bench_model.py --likelihood edcm    # dpmm under the EDCM likelihood
    python benchmarks/bench_model.py --document-concentration 50   # the length tempering's s

Prints docs/s and per-batch latency percentiles: for dpmm with rejuvenation off and with the
defaults; for svi likewise.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import add_data_option, load_texts, machine

from noveld.daemon.pipeline import make_model
from noveld.daemon.settings import Settings, load_settings
from noveld.featurize import Featurizer, Tokenizer
from noveld.models.edcm import EDCMMixture, length_token
from noveld.models.kernels.edcm import N_BINS
from noveld.models.vocabulary import Vocabulary
from noveld.schema import DecodedDocument


def run(batches: list, settings: Settings, reserved: list[int]) -> tuple[float, np.ndarray, int]:
    """One pass over pre-featurized batches; returns docs/s, batch latencies, clusters.
    ``reserved``: the vocabulary ids of the EDCM's length bins."""
    model = make_model(settings)
    if isinstance(model, EDCMMixture):
        model.bind_length_words(reserved)
    stats = model.new_state()
    lat = []
    n = 0
    t0 = time.perf_counter()
    for i, b in enumerate(batches):
        t = time.perf_counter()
        model.partial_fit(b, stats, np.random.default_rng(i))
        lat.append(time.perf_counter() - t)
        n += len(b)
    return n / (time.perf_counter() - t0), np.array(lat), int(stats.alive.sum())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    add_data_option(p)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--model", choices=["dpmm", "svi"], default="dpmm")
    p.add_argument("--likelihood", choices=["multinomial", "edcm"], default="multinomial")
    p.add_argument(
        "--document-concentration",
        type=float,
        default=None,
        help="s of the words' length tempering (default: the model's own)",
    )
    a = p.parse_args()
    tempering = (
        {}
        if a.document_concentration is None
        else {"document_concentration": a.document_concentration}
    )
    rows = load_texts(a.data)
    docs = [DecodedDocument(id=str(r["id"]), text=str(r["text"])) for r in rows]
    vocab = Vocabulary()
    reserved = vocab.ids([length_token(b) for b in range(N_BINS)])
    feat = Featurizer(Tokenizer(), vocab)
    batches = [
        feat.featurize(docs[i : i + a.batch_size])[0] for i in range(0, len(docs), a.batch_size)
    ]
    if a.model == "dpmm":
        variants = [("rejuvenation off", 0), ("defaults (2 sweeps)", 2)]
    else:
        variants = [("svi defaults", 0), ("svi, 2 local sweeps", 2)]
    configs = [
        (
            label,
            load_settings(
                None,
                {
                    "model": {
                        "kind": a.model,
                        "likelihood": a.likelihood,
                        "rejuvenation_sweeps" if a.model == "dpmm" else "local_sweeps": sweeps,
                        **tempering,
                    }
                },
            ),
        )
        for label, sweeps in variants
    ]
    run(batches[:4], configs[-1][1], reserved)  # JIT warm-up
    print(f"machine: {machine()}")
    print(
        f"data: {a.data} ({len(docs):,} docs, batch {a.batch_size}, model {a.model}, "
        f"likelihood {a.likelihood}, document concentration {a.document_concentration})"
    )
    for label, settings in configs:
        best = None
        for _ in range(a.repeat):
            r = run(batches, settings, reserved)
            best = r if best is None or r[0] > best[0] else best
        assert best is not None
        rate, lat, k = best
        print(
            f"{label:>22}: {rate:>10,.0f} docs/s  batch p50 {np.median(lat) * 1e3:6.2f} ms  "
            f"p99 {np.percentile(lat, 99) * 1e3:6.2f} ms  clusters {k}"
        )


if __name__ == "__main__":
    main()
