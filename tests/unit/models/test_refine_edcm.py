"""Offline EDCM refinement (`noveld fit --likelihood edcm`): site-by-site MAP sweeps over an
archive started from a partition.

Against a slow oracle that rebuilds every cluster's EDCM from its documents (Elkan's smoothed
fixed point solved by bisection, paper 002 eq. 2 for the likelihood) for each document taken
out; fixed documents stay put; MAP sweeps stop at a fixed point; fragments of one topic are
reassembled."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from noveld.models.base import DocBatch
from noveld.models.edcm import EDCMConfig, EDCMMixture
from noveld.models.kernels import edcm as ekern
from noveld.models.refine_edcm import refine_edcm_partition

ALPHA, B0, C = 0.8, 0.01, 5.0


def model(discount: float, deterministic: bool = True) -> EDCMMixture:
    cfg = EDCMConfig(
        alpha=ALPHA, alpha_scaling="none", discount=discount, deterministic=deterministic,
        prior=B0, prior_docs=C,
    )  # fmt: skip
    return EDCMMixture(cfg)


def batch_of(mod: EDCMMixture, docs: list[list[int]], vocab: int) -> DocBatch:
    """Word ids below ``vocab``; the length bins reserved above them."""
    mod.bind_length_words(list(range(vocab, vocab + ekern.N_BINS)))
    b = DocBatch.from_docs(docs, vocab + ekern.N_BINS)
    return dataclasses.replace(b, reserved=ekern.N_BINS)


def oracle_shape(members: list[list[int]], vocab: int) -> tuple[float, float, dict[int, int]]:
    """(s, D(s), document frequencies) of a cluster: ``s (D(s) + c) = T + c V b0`` with
    ``D(s) = Σ_d Σ_{i<n_d} 1/(s+i)``, by bisection on log s."""
    df: dict[int, int] = {}
    for doc in members:
        for w in set(doc):
            df[w] = df.get(w, 0) + 1
    total = sum(df.values()) + C * vocab * B0

    def dee(s: float) -> float:
        return sum(1.0 / (s + i) for doc in members for i in range(len(doc)))

    lo, hi = math.log(total / C * 1e-12), math.log(total / C)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        s = math.exp(mid)
        if s * (dee(s) + C) > total:
            hi = mid
        else:
            lo = mid
    s = math.exp(0.5 * (lo + hi))
    return s, dee(s), df


def oracle_weights(
    doc: list[int], clusters: dict[int, list[list[int]]], vocab: int, discount: float
) -> dict[int, float]:
    """Log seating weight of ``doc`` into each cluster (uid) and a new one (-1)."""
    n, words = len(doc), set(doc)
    out: dict[int, float] = {}
    for u, members in clusters.items():
        s, d, df = oracle_shape(members, vocab)
        mass = max(len(members) - discount, 1e-3)
        out[u] = (
            math.log(mass) + math.lgamma(s) - math.lgamma(s + n)
            + sum(math.log((df.get(w, 0) + C * B0) / (d + C)) for w in words)
        )  # fmt: skip
    s0 = vocab * B0
    out[-1] = (
        math.log(ALPHA + discount * len(clusters)) + math.lgamma(s0) - math.lgamma(s0 + n)
        + len(words) * math.log(B0)
    )  # fmt: skip
    return out


def slow_sweeps(
    docs: list[list[int]], start: list[int], vocab: int, discount: float, sweeps: int
) -> list[int]:
    """MAP sweeps (ties: the new cluster, then the oldest uid); a document alone and best
    alone keeps its uid, a new cluster takes the next uid; stops at a fixed point or at a
    partition it has left before."""
    assign = list(start)
    next_uid = max(start) + 1
    seen = {canonical(assign)}
    for _ in range(sweeps):
        before = list(assign)
        for d, doc in enumerate(docs):
            own = assign[d]
            clusters: dict[int, list[list[int]]] = {}
            for i, u in enumerate(assign):
                if i != d:
                    clusters.setdefault(u, []).append(docs[i])
            w = oracle_weights(doc, clusters, vocab, discount)
            best = max(w, key=lambda u: (w[u], u == -1, -u))
            if best == -1:
                if own in clusters:
                    best, next_uid = next_uid, next_uid + 1
                else:
                    best = own
            assign[d] = best
        if assign == before or canonical(assign) in seen:
            break
        seen.add(canonical(assign))
    return assign


def canonical(labels: list[int]) -> tuple[int, ...]:
    """The partition with clusters numbered by first document."""
    first: dict[int, int] = {}
    return tuple(first.setdefault(u, len(first)) for u in labels)


def noisy_docs(rng: np.random.Generator, n: int) -> list[list[int]]:
    """Four topics of 10 words each, a fifth of the tokens from anywhere; 1–20 tokens (> 16
    takes the kernel's log path too)."""
    docs = []
    for _ in range(n):
        t, length = int(rng.integers(0, 4)), int(rng.integers(1, 21))
        docs.append(
            [int(10 * t + rng.integers(0, 10)) if rng.random() < 0.8 else int(rng.integers(0, 40))
             for _ in range(length)]
        )  # fmt: skip
    return docs


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("discount", [0.0, 0.5])
def test_sweeps_equal_the_slow_oracle(seed: int, discount: float) -> None:
    rng = np.random.default_rng(seed)
    vocab = 40
    docs = noisy_docs(rng, 24)
    start = [int(x) for x in rng.integers(0, 3, size=len(docs))]
    sweeps = 1 + seed % 3
    mod = model(discount)
    got = refine_edcm_partition(
        mod, batch_of(mod, docs, vocab), np.array(start), math.log(ALPHA), sweeps,
        np.zeros(len(docs), np.bool_), max(start) + 1, rng,
    )  # fmt: skip
    assert got.uids.tolist() == slow_sweeps(docs, start, vocab, discount, sweeps)
    assert 1 <= len(got.moved) <= sweeps and (len(got.moved) == sweeps or got.moved[-1] == 0)


def topic_docs(rng: np.random.Generator, n: int) -> tuple[list[list[int]], list[int]]:
    """Documents of three topics with disjoint 10-word vocabularies, 6–14 tokens each."""
    topics = [int(t) for t in rng.integers(0, 3, size=n)]
    docs = [list(10 * t + rng.integers(0, 10, size=int(rng.integers(6, 15)))) for t in topics]
    return docs, topics


def test_fragments_are_reassembled_and_sweeps_stop_at_a_fixed_point() -> None:
    rng = np.random.default_rng(4)
    docs, topics = topic_docs(rng, 90)
    start = [3 * t + i % 3 for i, t in enumerate(topics)]  # each topic in three fragments
    mod = model(0.5)
    seen: list[tuple[int, int, int]] = []
    res = refine_edcm_partition(
        mod, batch_of(mod, docs, 30), np.array(start), math.log(ALPHA), 10,
        np.zeros(len(docs), np.bool_), 9, rng, lambda i, mv, k: seen.append((i, mv, k)),
    )  # fmt: skip
    groups = {frozenset(i for i, u in enumerate(res.uids) if u == v) for v in set(res.uids)}
    truth = {frozenset(i for i, t in enumerate(topics) if t == v) for v in range(3)}
    assert groups == truth
    assert res.moved[-1] == 0 and len(res.moved) < 10  # stopped at the fixed point
    assert [s[:2] for s in seen] == list(enumerate(res.moved)) and seen[-1][2] == 3


def test_fixed_documents_stay_and_zero_sweeps_change_nothing() -> None:
    rng = np.random.default_rng(3)
    docs, _ = topic_docs(rng, 45)
    start = [int(x) for x in rng.integers(0, 5, size=len(docs))]
    mod = model(0.5)
    batch = batch_of(mod, docs, 30)
    same = refine_edcm_partition(
        mod, batch, np.array(start), 0.0, 0, np.zeros(45, np.bool_), 5, rng
    )
    assert same.uids.tolist() == start and same.moved == []
    fixed = np.arange(45) % 3 == 0
    res = refine_edcm_partition(mod, batch, np.array(start), 0.0, 4, fixed, 5, rng)
    kept = [u for u, f in zip(res.uids.tolist(), fixed, strict=True) if f]
    assert kept == [u for u, f in zip(start, fixed, strict=True) if f]
    assert sum(res.moved) > 0


def test_sampled_sweeps_are_reproducible_per_seed() -> None:
    docs, _ = topic_docs(np.random.default_rng(5), 60)
    start = np.arange(60) % 4
    mod = model(0.5, deterministic=False)
    batch = batch_of(mod, docs, 30)

    def run(seed: int) -> list[int]:
        res = refine_edcm_partition(
            mod, batch, start, 0.0, 3, np.zeros(60, np.bool_), 4, np.random.default_rng(seed)
        )
        return list(res.uids.tolist())

    assert run(1) == run(1)
