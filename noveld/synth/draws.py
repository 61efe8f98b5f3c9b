"""Draws beyond a story's words: a von Mises–Fisher embedding per document, and the Pólya urn
that makes documents bursty."""

from __future__ import annotations

import numpy as np

from noveld.synth.seeded import FloatArray


def sample_vmf(mu: FloatArray, kappa: float, rng: np.random.Generator) -> FloatArray:
    """One draw from vMF(μ_i, κ) per row of ``mu`` (unit rows), by Wood's (1994) rejection
    sampler for the cosine w to the mean and a uniform direction orthogonal to it."""
    n, p = mu.shape
    b = (-2.0 * kappa + np.sqrt(4.0 * kappa * kappa + (p - 1.0) ** 2)) / (p - 1.0)
    x0 = (1.0 - b) / (1.0 + b)
    c = kappa * x0 + (p - 1.0) * np.log(1.0 - x0 * x0)
    w = np.empty(n)
    todo = np.arange(n)
    while todo.shape[0]:
        z = rng.beta((p - 1.0) / 2.0, (p - 1.0) / 2.0, todo.shape[0])
        cand = (1.0 - (1.0 + b) * z) / (1.0 - (1.0 - b) * z)
        u = rng.random(todo.shape[0])
        ok = kappa * cand + (p - 1.0) * np.log(1.0 - x0 * cand) - c >= np.log(u)
        w[todo[ok]] = cand[ok]
        todo = todo[~ok]
    v = rng.standard_normal((n, p))
    v -= (v * mu).sum(axis=1, keepdims=True) * mu
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    out: FloatArray = w[:, None] * mu + np.sqrt(np.maximum(1.0 - w * w, 0.0))[:, None] * v
    return out


def polya_repeats(
    ids: np.ndarray, lengths: np.ndarray, burstiness: float, rng: np.random.Generator
) -> np.ndarray:
    """Documents' words (concatenated, ``lengths`` each) after the Pólya urn of the package
    docstring: word i of a document repeats a uniformly chosen earlier word with probability
    i/(b+i) — earlier words as they came out of the urn — else it keeps its fresh draw."""
    m = ids.shape[0]
    begins = np.repeat(np.cumsum(lengths) - lengths, lengths)
    pos = np.arange(m) - begins
    repeat = rng.random(m) < pos / (burstiness + pos)
    source = np.arange(m)
    pick = begins + np.floor(rng.random(m) * pos).astype(np.int64)
    source[repeat] = pick[repeat]
    while True:  # follow each repeat back to a fresh draw (sources only point backwards)
        nxt = source[source]
        if np.array_equal(nxt, source):
            break
        source = nxt
    out: np.ndarray = ids[source]
    return out
