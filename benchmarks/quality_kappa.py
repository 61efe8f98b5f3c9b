"""The vMF concentration κ learned from the stream against hand-set typical cosines: NMI of
``noveld evaluate`` (the real pipeline) under the vmf and hybrid likelihoods, one pass in stream
order over labelled JSONL files, at each encoder dimension.

    python benchmarks/quality_kappa.py [--data FILE ...] [--dims 64 128 256]
                                       [--likelihoods hybrid vmf] [--cosines learned 0.4 0.5]
                                       [--embeddings encoder|own|shift|noise384]

Each row is one run with the settings' defaults but ``--encoder-dim``, the likelihood (featurizer
hybrid or semantic; with other ``--embeddings``, words and the documents' own embeddings) and
its typical cosine (``learned``: κ estimated from the clusters at each batch,
:mod:`noveld.models.concentration`, which the settings do not offer). Beside NMI it prints the
typical cosine the estimator gives on the run's own partition and, per file and dimension, on
the true labels, with the stream's random-pair cosine (the background every pair shares).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile

# one BLAS thread: the batch's small products gain nothing from more, and on a shared 2-core
# machine a thread pool per process oversubscribes it
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DEFAULT_DATA, data_file, load_texts, machine

from noveld.daemon.evaluate import StreamRecorder, evaluate_file
from noveld.daemon.settings import Settings, load_settings
from noveld.featurize.encoder import StaticVectors
from noveld.models.concentration import learned_cosine, pair_statistics

FEATURIZER = {"hybrid": "hybrid", "vmf": "semantic"}
SETTING = {"hybrid": "hybrid_cosine", "vmf": "vmf_cosine"}
#: the prior of the estimates printed beside the runs (200 pairs: nothing against a stream's)
PRIOR = 0.5


def run_settings(likelihood: str, cosine: float | None, model: dict[str, object]) -> Settings:
    """The defaults with ``model``'s entries; the likelihood's typical cosine ``cosine`` (None:
    learned, the models' ``cosine=None``, which the settings do not offer)."""
    settings = load_settings(None, {"model": {"likelihood": likelihood, **model}})
    m = settings.model.model_copy(update={SETTING[likelihood]: cosine})
    return settings.model_copy(update={"model": m})


def partition_cosine(emb: np.ndarray, groups: np.ndarray) -> tuple[float, float, float]:
    """The estimator's typical cosine on a partition of unit vectors (rows of ``emb``), with and
    without the background taken out, and the random-pair cosine of the whole stream."""
    _, inv = np.unique(groups, return_inverse=True)
    res = np.zeros((int(inv.max()) + 1, emb.shape[1]))
    np.add.at(res, inv, emb)
    mass = np.bincount(inv).astype(np.float64)
    _, _, everywhere, all_pairs = pair_statistics(res, mass)
    return (
        learned_cosine(res, mass, PRIOR),
        learned_cosine(res, mass, PRIOR, background=False),
        everywhere / all_pairs,
    )


def made_up(emb: np.ndarray, how: str) -> np.ndarray:
    """The encoder's 256-d unit vectors as another embedding model's: ``shift`` adds a direction
    every document shares (random pairs then at cosine ~0.5), ``noise384`` rotates them into 384
    dimensions and adds isotropic noise (within-story cosines fall by about half)."""
    rng = np.random.default_rng(7)
    if how == "shift":
        u = rng.standard_normal(emb.shape[1])
        out = emb + u / np.linalg.norm(u)
    else:
        q, _ = np.linalg.qr(rng.standard_normal((384, 384)))
        out = emb @ q[: emb.shape[1]] + 0.06 * rng.standard_normal((emb.shape[0], 384))
    unit: np.ndarray = out / np.linalg.norm(out, axis=1, keepdims=True)
    return unit


def vectors(
    rows: list[dict[str, object]], how: str, dim: int, tmp: Path
) -> tuple[np.ndarray, np.ndarray, Path | None]:
    """The documents' unit vectors, which have one, and the file of own embeddings to run on
    (None: the built-in encoder's, computed by the pipeline itself)."""
    if how == "own":
        emb = np.array([r["embedding"] for r in rows], dtype=np.float64)
        return emb, np.ones(len(rows), dtype=np.bool_), None
    emb, has = StaticVectors(dim if how == "encoder" else 256).encode(
        [str(r["text"]) for r in rows]
    )
    emb = emb.astype(np.float64)
    if how == "encoder":
        return emb, has, None
    emb = made_up(emb, how)
    out = tmp / f"{how}.jsonl"
    with open(out, "w", encoding="utf-8") as fh:
        for r, e, h in zip(rows, emb.tolist(), has.tolist(), strict=True):
            if h:
                fh.write(json.dumps({**r, "embedding": e}) + "\n")
    return emb, has, out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    files = [DEFAULT_DATA.with_name(n) for n in ("news.jsonl", "news-t.jsonl", "reuters-r8.jsonl")]
    p.add_argument("--data", type=data_file, nargs="+", default=[str(f) for f in files])
    p.add_argument("--dims", type=int, nargs="+", default=[256])
    p.add_argument("--likelihoods", nargs="+", choices=sorted(FEATURIZER), default=["hybrid"])
    p.add_argument("--cosines", nargs="+", default=["learned", "0.4", "0.5"])
    p.add_argument(
        "--embeddings",
        choices=["encoder", "own", "shift", "noise384"],
        default="encoder",
        help="the vectors: the built-in encoder's at each of --dims, the files' own ('embedding' "
        "fields), or the encoder's 256-d ones made into another model's (shift: a direction "
        "every document shares; noise384: 384-d with isotropic noise)",
    )
    a = p.parse_args()
    print(f"machine: {machine()}")
    tmp = Path(tempfile.mkdtemp(prefix="quality_kappa."))
    for path in a.data:
        rows = load_texts(Path(path))
        ids = [str(r["id"]) for r in rows]
        truth = np.array([str(r["label"]) for r in rows])
        for dim in a.dims if a.embeddings == "encoder" else [0]:
            emb, has, own = vectors(rows, a.embeddings, dim, tmp)
            dim = emb.shape[1]
            c_true, c_raw, background = partition_cosine(emb[has], truth[has])
            print(f"\n{Path(path).name}, {a.embeddings} p = {dim}: estimator on the true labels "
                  f"{c_true:.3f} ({c_raw:.3f} with the background), random-pair cosine "
                  f"{background:.3f}")  # fmt: skip
            row_of = {d: i for i, d in enumerate(ids)}
            for lik in a.likelihoods:
                for c in a.cosines:
                    cosine = None if c == "learned" else float(c)
                    model: dict[str, object] = (
                        {"featurizer": FEATURIZER[lik], "encoder_dim": dim}
                        if own is None and a.embeddings == "encoder"
                        else {"featurizer": "words", "embedding_dim": dim}
                    )
                    got: list[StreamRecorder] = []
                    report = evaluate_file(
                        run_settings(lik, cosine, model), str(own or path), on_done=got.append
                    )
                    rec = got[0]
                    rows_run = np.array([row_of[d] for d in rec.ids])
                    keep = has[rows_run]
                    c_run, _, _ = partition_cosine(
                        emb[rows_run[keep]], np.asarray(rec.clusters)[keep]
                    )
                    print(f"  {lik:>6} cosine {c:>7}: NMI {report['nmi']:.3f}  "
                          f"clusters {report['clusters']:4d}  estimator on its partition "
                          f"{c_run:.3f}", flush=True)  # fmt: skip
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
