"""The hybrid's offline refinement (``noveld fit --likelihood hybrid``): with blocks of one
document the blocked sweeps are per-document collapsed Gibbs, equal to a dense oracle that
recomputes every weight with gammaln; larger blocks keep the known documents where they are;
the fitted statistics carry each cluster's resultant on the dimension entries."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from helpers.hybrid_oracle import P, V, hybrid, make_batch, oracle_weights
from hypothesis import given, settings
from hypothesis import strategies as st

from noveld.models.base import DocBatch
from noveld.models.hybrid import HybridConfig
from noveld.models.hybrid_batch import Centring
from noveld.models.kernels import multinomial as kern
from noveld.models.refine import partition_stats
from noveld.models.refine_hybrid import refine_hybrid_partition, with_vector_entries


def canonical(uids: list[int]) -> tuple[int, ...]:
    """The partition with its clusters numbered by first document."""
    first: dict[int, int] = {}
    return tuple(first.setdefault(u, len(first)) for u in uids)


def oracle_refine(
    batch: DocBatch,
    uids: np.ndarray,
    cfg: HybridConfig,
    log_alpha: float,
    sweeps: int,
    fixed: np.ndarray,
    next_uid: int,
) -> tuple[list[int], list[int]]:
    """MAP per-document Gibbs from dense statistics: each free document taken out and seated
    again (ties to a new cluster, then the oldest uid); a document seated alone keeps its uid
    when its cluster was left empty, else takes the next one; stops at a fixed point or at a
    partition it has left before."""
    assert batch.emb is not None
    xs = []
    for d in range(len(batch)):
        w, c = batch.doc(d)
        xw = np.zeros(V)
        xw[w - 2 * P] = c
        xs.append((xw, batch.emb[d] if batch.emb[d].any() else None))
    m: dict[int, float] = {}
    n: dict[int, np.ndarray] = {}
    r: dict[int, np.ndarray] = {}
    out = [int(u) for u in uids.tolist()]
    for d, u in enumerate(out):
        m[u] = m.get(u, 0.0) + 1.0
        n[u] = n.get(u, np.zeros(V)) + xs[d][0]
        r[u] = r.get(u, np.zeros(P)) + (xs[d][1] if xs[d][1] is not None else 0.0)
    vbeta = batch.n_words * cfg.beta
    moved_per: list[int] = []
    seen = {canonical(out)}
    for _ in range(sweeps):
        moved = 0
        for d in np.flatnonzero(~fixed).tolist():
            xw, x = xs[d]
            own = out[d]
            m[own] -= 1.0
            n[own] = n[own] - xw
            if x is not None:
                r[own] = r[own] - x
            order = sorted(m)
            live = [m[u] > 0.5 for u in order]
            s, new = oracle_weights(
                xw, x, [m[u] for u in order], [n[u] for u in order], [r[u] for u in order],
                live, cfg, vbeta, log_alpha,
            )  # fmt: skip
            finite = s[np.isfinite(s)]
            top = max(new, finite.max() if finite.size else -np.inf)
            if new >= top - kern.TIE_TOL:
                if m[own] < 0.5:
                    best = own
                else:
                    best, next_uid = next_uid, next_uid + 1
                    m[best], n[best], r[best] = 0.0, np.zeros(V), np.zeros(P)
            else:
                best = next(
                    order[k] for k in range(len(order)) if live[k] and s[k] >= top - kern.TIE_TOL
                )
            m[best] += 1.0
            n[best] = n[best] + xw
            if x is not None:
                r[best] = r[best] + x
            moved += best != own
            out[d] = best
        moved_per.append(moved)
        if moved == 0 or canonical(out) in seen:
            break  # a fixed point or a cycle
        seen.add(canonical(out))
    return out, moved_per


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    w=st.sampled_from([0.0, 0.5, 1.0]),
    start=st.sampled_from(["one", "each", "random"]),
)
def test_blocks_of_one_are_per_document_gibbs_as_the_oracle(
    seed: int, w: float, start: str
) -> None:
    rng = np.random.default_rng(seed)
    batch = make_batch(rng, 24, with_words=0.9, with_vectors=0.9)
    model = hybrid(w, document_concentration=3.0, centre=True)
    uids = {
        "one": np.zeros(24, dtype=np.int64),
        "each": np.arange(24, dtype=np.int64),
        "random": rng.integers(0, 5, 24),
    }[start]
    fixed = rng.random(24) < 0.2
    log_alpha = model.log_alpha(len(batch))
    got = refine_hybrid_partition(
        batch, uids, model.config, log_alpha, 4, fixed, 100, np.random.default_rng(0), block=1
    )
    # the oracle sees the vectors as the refinement scores them: around the archive's mean
    assert batch.emb is not None
    centred = Centring.of(batch.emb[:0], np.zeros(0), batch.emb).vectors(batch.emb)
    want, moved = oracle_refine(
        replace(batch, emb=centred), uids, model.config, log_alpha, 4, fixed, 100
    )
    assert got.uids.tolist() == want
    assert got.moved == moved
    assert (got.uids[fixed] == uids[fixed]).all()


@pytest.mark.parametrize("block", [5, 256])
def test_blocked_sweeps_keep_the_known_documents_and_count_each_document_once(block: int) -> None:
    rng = np.random.default_rng(7)
    batch = make_batch(rng, 60)
    model = hybrid(0.5)
    uids = np.arange(60, dtype=np.int64) // 20
    fixed = np.zeros(60, dtype=np.bool_)
    fixed[::7] = True
    calls: list[tuple[int, int, int]] = []
    got = refine_hybrid_partition(
        batch, uids, model.config, model.log_alpha(8), 3, fixed, 3, np.random.default_rng(1),
        lambda i, moved, k: calls.append((i, moved, k)), block=block,
    )  # fmt: skip
    assert (got.uids[fixed] == uids[fixed]).all()
    assert [c[1] for c in calls] == got.moved and len(calls) == len(got.moved)
    assert calls[-1][2] == np.unique(got.uids).shape[0]  # the live clusters, emptied ones gone
    assert got.next_uid >= 3 and (got.uids < got.next_uid).all()


def test_the_fitted_statistics_hold_each_clusters_resultant() -> None:
    """``with_vector_entries`` puts the vectors where the hybrid reads them: its resultants of
    the statistics are the sums of the members' vectors, its words the members' words."""
    rng = np.random.default_rng(3)
    batch = make_batch(rng, 30)
    assert batch.emb is not None
    model = hybrid(1.0)
    uids = rng.integers(0, 4, 30)
    weights = rng.random(30)
    stats, slots = partition_stats(
        with_vector_entries(batch, *model.dimension_ids()), uids, 4, weights
    )
    res = model.resultants(stats)
    for k in range(stats.kmax):
        members = slots == k
        np.testing.assert_allclose(res[k], weights[members] @ batch.emb[members], atol=1e-12)
        ws, cs = model.term_weights(stats, int(stats.uid[k]))
        plain, _ = partition_stats(batch, uids, 4, weights)
        ws2, cs2 = plain.word_counts(k)
        assert dict(zip(ws.tolist(), cs.tolist(), strict=True)) == pytest.approx(
            dict(zip(ws2.tolist(), cs2.tolist(), strict=True))
        )
    assert stats.ntok[: stats.kmax].sum() == pytest.approx(float(weights @ batch.lengths))
