"""Burst splits (``DPMM._split_bursts``): the split gain kernel against a dense log-joint
oracle, the move itself, and exact replay of a batch that split."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from helpers.dpmm_oracle import log_joint
from hypothesis import example, given, settings
from hypothesis import strategies as st

from noveld.models.base import DocBatch
from noveld.models.dpmm import DPMM, DPMMConfig, replay_delta
from noveld.models.kernels import multinomial as kern
from noveld.models.suffstats import MultinomialStats
from noveld.state.base import NamespaceState, state_digest

VOCAB = 12


def counts_of(docs: list[list[int]]) -> np.ndarray:
    n = np.zeros(VOCAB)
    for d in docs:
        np.add.at(n, d, 1.0)
    return n


def pool(clusters: list[list[list[int]]]) -> MultinomialStats:
    words = []
    for docs in clusters:
        n = counts_of(docs)
        w = np.flatnonzero(n)
        words.append((w, n[w]))
    return MultinomialStats.from_clusters(
        list(range(len(clusters))),
        [float(len(c)) for c in clusters],
        [float(sum(len(d) for d in c)) for c in clusters],
        words,
        1.0,
        len(clusters),
        sum(len(c) for c in clusters),
        VOCAB,
    )


doc = st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=5)


@settings(max_examples=100, deadline=None)
@given(
    rest=st.lists(doc, min_size=1, max_size=4),
    group=st.lists(doc, min_size=2, max_size=4),
    others=st.lists(st.lists(doc, min_size=1, max_size=3), max_size=3),
    d=st.sampled_from([0.0, 0.5]),
)
def test_split_gain_equals_the_log_joint_difference(
    rest: list[list[int]], group: list[list[int]], others: list[list[list[int]]], d: float
) -> None:
    beta, theta = 0.1, 0.7
    clusters = [rest + group, *others]
    stats = pool(clusters)
    batch = DocBatch.from_docs(group, VOCAB)
    k_live = len(clusters)
    gain = kern.split_gain(
        0, np.arange(len(group)), batch.ptr, batch.words, batch.counts, batch.lengths,
        stats.m, stats.ntok, stats.head, stats.nxt, stats.pk, stats.pc, 1.0, beta,
        VOCAB * beta, math.log(theta + d * k_live), d,
    )  # fmt: skip
    m_before = np.array([len(c) for c in clusters], dtype=float)
    n_before = np.vstack([counts_of(c) for c in clusters])
    m_after = np.append(np.array([len(rest)], dtype=float), m_before[1:])
    m_after = np.append(m_after, float(len(group)))
    n_after = np.vstack([counts_of(rest), *n_before[1:], counts_of(group)])
    expected = log_joint(m_after, n_after, beta, theta, d) - log_joint(
        m_before, n_before, beta, theta, d
    )
    assert gain == pytest.approx(expected, rel=1e-9, abs=1e-8)


def test_split_gain_is_minus_infinity_when_nothing_would_remain() -> None:
    group = [[1, 2], [2, 3]]
    stats = pool([group])
    batch = DocBatch.from_docs(group, VOCAB)
    gain = kern.split_gain(
        0, np.arange(2), batch.ptr, batch.words, batch.counts, batch.lengths, stats.m,
        stats.ntok, stats.head, stats.nxt, stats.pk, stats.pc, 1.0, 0.1, 1.2, 0.0, 0.0,
    )  # fmt: skip
    assert gain == -np.inf


OLD = [[0, 1, 2, 3]] * 8  # an old story
BURST = [[3, 8, 9, 10], [8, 9, 10, 11], [3, 8, 9, 11]]  # a new one sharing word 3


def model() -> DPMM:
    return DPMM(DPMMConfig(alpha=0.05, beta=0.05, alpha_scaling="none", discount=0.0))


def test_a_burst_seated_in_an_old_cluster_moves_out_as_a_group() -> None:
    stats = pool([OLD + BURST])
    batch = DocBatch.from_docs(BURST, VOCAB)
    assign = np.zeros(len(BURST), dtype=np.int64)
    forced = np.full(len(BURST), -1, dtype=np.int64)
    m = model()
    assert m._split_bursts(batch, assign, stats, forced) == 1
    new = int(assign[0])
    assert new != 0 and assign.tolist() == [new] * 3 and stats.fresh[new]
    assert int(stats.uid[new]) == 1  # the next uid
    ws, cs = stats.word_counts(0)
    assert dict(zip(ws[cs > 0].tolist(), cs[cs > 0].tolist(), strict=True)) == {
        w: 8.0 for w in range(4)
    }
    ws, cs = stats.word_counts(new)
    got = dict(zip(ws[cs > 0].tolist(), cs[cs > 0].tolist(), strict=True))
    assert got == {3: 2.0, 8: 3.0, 9: 3.0, 10: 2.0, 11: 2.0}
    assert stats.m[0] == 8 and stats.m[new] == 3 and stats.ntok[new] == 12


def test_documents_that_fit_the_old_cluster_stay_and_labelled_groups_are_kept() -> None:
    m = model()
    same = [[0, 1, 2], [1, 2, 3]]
    stats = pool([OLD + same])
    assign = np.zeros(2, dtype=np.int64)
    batch = DocBatch.from_docs(same, VOCAB)
    assert m._split_bursts(batch, assign, stats, np.full(2, -1, dtype=np.int64)) == 0
    stats = pool([OLD + BURST])
    assign = np.zeros(3, dtype=np.int64)
    forced = np.array([-1, 0, -1], dtype=np.int64)  # one document has a known label
    assert m._split_bursts(DocBatch.from_docs(BURST, VOCAB), assign, stats, forced) == 0
    assert assign.tolist() == [0, 0, 0]


def test_a_batch_that_split_is_born_and_replays_exactly() -> None:
    m = DPMM(
        DPMMConfig(alpha=0.002, beta=0.05, alpha_scaling="none", discount=0.0, deterministic=True)
    )
    live = NamespaceState({}, m.new_state())
    replayed = NamespaceState({}, MultinomialStats())
    rng = np.random.default_rng(0)
    r1 = m.partial_fit(DocBatch.from_docs(OLD, VOCAB), live.stats, rng)
    replay_delta(replayed.stats, r1.delta, 0.0)
    r2 = m.partial_fit(DocBatch.from_docs(BURST, VOCAB), live.stats, rng)
    replay_delta(replayed.stats, r2.delta, 0.0)
    old_uid = int(r1.assignments[0])
    assert len({*r2.assignments.tolist()}) == 1 and int(r2.assignments[0]) != old_uid
    assert [(u, d) for u, d, _ in r2.born] == [(int(r2.assignments[0]), 0)]
    assert state_digest(replayed) == state_digest(live)
    # without the split the burst stays in the old story's cluster
    no_split = DPMM(replace(m.config, split=False))
    stats = no_split.new_state()
    no_split.partial_fit(DocBatch.from_docs(OLD, VOCAB), stats, rng)
    r = no_split.partial_fit(DocBatch.from_docs(BURST, VOCAB), stats, rng)
    assert r.assignments.tolist() == [old_uid] * 3 and r.born == []


def greedy_reference(
    stats: MultinomialStats, batch: DocBatch, beta: float, log_new: float, d: float
) -> list[tuple[list[int], float]]:
    """Backward selection with the plain kernel: the specification of best_split_group. Every
    outcome it can reach: removals whose gains tie (to rounding: the kernel sums the same
    terms in another order) are all followed."""

    def gain(group: list[int]) -> float:
        value = kern.split_gain(
            0, np.array(group, dtype=np.int64), batch.ptr, batch.words, batch.counts,
            batch.lengths, stats.m, stats.ntok, stats.head, stats.nxt, stats.pk, stats.pc,
            1.0, beta, VOCAB * beta, log_new, d,
        )  # fmt: skip
        return float(value)

    def walk(docs: list[int], best: float) -> list[tuple[list[int], float]]:
        if best > 0 or len(docs) <= 2:
            return [(docs, best)]
        scored = [(gain(docs[:i] + docs[i + 1 :]), i) for i in range(len(docs))]
        top = max(g for g, _ in scored)
        tied = [i for g, i in scored if math.isclose(g, top, rel_tol=1e-12, abs_tol=1e-12)]
        return [out for i in tied for out in walk(docs[:i] + docs[i + 1 :], scored[i][0])]

    docs = list(range(len(batch)))
    return walk(docs, gain(docs))


@settings(max_examples=100, deadline=None)
@given(
    rest=st.lists(doc, min_size=1, max_size=6),
    group=st.lists(doc, min_size=2, max_size=7),
    d=st.sampled_from([0.0, 0.5]),
)
@example(  # two removals tie to the last bit, and the paths after them differ
    rest=[[0], [0], [0, 1, 2]], group=[[0], [0, 0, 2, 2], [0, 0, 0, 0], [0, 0, 2]], d=0.0
)
def test_best_split_group_is_the_greedy_backward_selection(
    rest: list[list[int]], group: list[list[int]], d: float
) -> None:
    beta, log_new = 0.1, math.log(0.7)
    stats = pool([rest + group])
    batch = DocBatch.from_docs(group, VOCAB)
    keep = np.empty(len(group), dtype=np.bool_)
    gain = kern.best_split_group(
        0, np.arange(len(group)), batch.ptr, batch.words, batch.counts, batch.lengths,
        stats.m, stats.ntok, stats.head, stats.nxt, stats.pk, stats.pc, 1.0, beta,
        VOCAB * beta, log_new, d, keep,
    )  # fmt: skip
    outcomes = greedy_reference(stats, batch, beta, log_new, d)
    matching = [(c, e) for c, e in outcomes if math.isclose(gain, e, rel_tol=1e-9, abs_tol=1e-8)]
    assert matching, (gain, outcomes)  # the kernel's gain is one greedy path's
    chosen, expected = matching[0]
    got = np.flatnonzero(keep).tolist()
    exact = kern.split_gain(
        0, np.array(got, dtype=np.int64), batch.ptr, batch.words, batch.counts, batch.lengths,
        stats.m, stats.ntok, stats.head, stats.nxt, stats.pk, stats.pc, 1.0, beta,
        VOCAB * beta, log_new, d,
    )  # fmt: skip
    assert gain == pytest.approx(exact, rel=1e-9, abs=1e-8)
    if got != chosen:  # only an exact tie between two removals may pick another subgroup
        assert exact == pytest.approx(expected, rel=1e-9, abs=1e-8)


def test_a_mixed_group_leaves_the_old_storys_documents_behind() -> None:
    stats = pool([[*OLD, [0, 1, 2], *BURST]])
    batch = DocBatch.from_docs([[0, 1, 2], *BURST], VOCAB)
    assign = np.zeros(4, dtype=np.int64)
    moved = model()._split_bursts(batch, assign, stats, np.full(4, -1, dtype=np.int64))
    assert moved == 1 and assign[0] == 0  # the old story's document stays
    assert len(set(assign[1:].tolist())) == 1 and assign[1] != 0  # the burst moves together


def test_svi_splits_a_burst_out_of_an_old_component_and_replays_exactly() -> None:
    """``svi`` with ``split``: the batch's responsibilities are hardened and the burst the
    local step seated in the old story's component leaves it as a new component."""
    from noveld.models.svi import SVI, SVIConfig

    cfg = SVIConfig(alpha=0.002, beta=0.05, alpha_scaling="none", discount=0.0, deterministic=True)
    outcomes = {}
    for split in (True, False):
        m = SVI(replace(cfg, split=split))
        live = m.new_state()
        replayed = MultinomialStats()
        rng = np.random.default_rng(0)
        r1 = m.partial_fit(DocBatch.from_docs(OLD, VOCAB), live, rng)
        replay_delta(replayed, r1.delta, 0.0)
        r2 = m.partial_fit(DocBatch.from_docs(BURST, VOCAB), live, rng)
        replay_delta(replayed, r2.delta, 0.0)
        assert state_digest(NamespaceState({}, replayed)) == state_digest(NamespaceState({}, live))
        outcomes[split] = (int(r1.assignments[0]), r2.assignments.tolist(), r2.born)
    old, burst, born = outcomes[True]
    assert len(set(burst)) == 1 and burst[0] != old and [u for u, _, _ in born] == [burst[0]]
    old, burst, born = outcomes[False]
    assert burst == [old] * 3 and born == []  # without the split it stays in the old story


@settings(max_examples=60, deadline=None)
@given(
    clusters=st.lists(
        st.tuples(st.lists(doc, min_size=1, max_size=4), st.lists(doc, min_size=2, max_size=5)),
        min_size=1,
        max_size=4,
    ),
    d=st.sampled_from([0.0, 0.5]),
)
def test_best_split_groups_equals_one_candidate_at_a_time(
    clusters: list[tuple[list[list[int]], list[list[int]]]], d: float
) -> None:
    """The one-call-per-round kernel gives each candidate the gain and group of a separate
    best_split_group call, with one more live cluster after every positive gain."""
    beta, theta = 0.1, 0.7
    stats = pool([rest + group for rest, group in clusters])
    batch_docs = [doc_ for _, group in clusters for doc_ in group]
    batch = DocBatch.from_docs(batch_docs, VOCAB)
    sizes = [len(group) for _, group in clusters]
    ends = np.cumsum(sizes)
    starts = ends - np.array(sizes)
    slots = np.arange(len(clusters))
    order = np.arange(len(batch_docs))
    n_live = len(clusters)
    keep = np.empty(len(batch_docs), dtype=np.bool_)
    gains = kern.best_split_groups(
        slots, starts, ends, order, batch.ptr, batch.words, batch.counts, batch.lengths,
        stats.m, stats.ntok, stats.head, stats.nxt, stats.pk, stats.pc, 1.0, beta,
        VOCAB * beta, theta, d, n_live, keep,
    )  # fmt: skip
    live = n_live
    for k in range(len(clusters)):
        a, b = int(starts[k]), int(ends[k])
        one = np.empty(b - a, dtype=np.bool_)
        gain = kern.best_split_group(
            k, order[a:b], batch.ptr, batch.words, batch.counts, batch.lengths, stats.m,
            stats.ntok, stats.head, stats.nxt, stats.pk, stats.pc, 1.0, beta, VOCAB * beta,
            math.log(theta + d * live), d, one,
        )  # fmt: skip
        assert gains[k] == gain and keep[a:b].tolist() == one.tolist()
        live += gain > 0.0


def reseat_reference(
    batch: DocBatch, assign: np.ndarray, forced: np.ndarray, pinned: np.ndarray,
    stats: MultinomialStats, beta: float, log_alpha: float, d: float,
) -> None:  # fmt: skip
    """The re-seat step one document at a time with the public kernels (the specification of
    reseat_into_fresh: remove, score, MAP choice, move only into a fresh cluster)."""
    lp = np.empty(stats.m.shape[0])
    out = np.empty(2)
    for i in range(len(batch)):
        cur = int(assign[i])
        if stats.fresh[cur] or forced[i] >= 0 or pinned[cur]:
            continue
        w, c = batch.doc(i)
        nd = int(batch.lengths[i])
        args = (stats.m, stats.ntok, stats.head, stats.nxt, stats.pk, stats.pc, stats.ictl)
        kern.add_document(cur, w, c, nd, -1.0, *args)
        lp_new = kern.score_document(
            w, c, nd, lp, stats.m, stats.ntok, stats.alive, stats.head, stats.nxt, stats.pk,
            stats.pc, stats.kmax, 1.0, beta, VOCAB * beta, log_alpha, d,
        )  # fmt: skip
        k = kern.choose(lp, stats.kmax, lp_new, 0.0, True, out, stats.uid)
        dst = k if k >= 0 and stats.fresh[k] else cur
        kern.add_document(dst, w, c, nd, 1.0, *args)
        assign[i] = dst


@settings(max_examples=60, deadline=None)
@given(
    old=st.lists(st.lists(doc, min_size=1, max_size=3), min_size=1, max_size=3),
    new=st.lists(doc, min_size=1, max_size=3),
    batch_docs=st.lists(doc, min_size=1, max_size=6),
    seats=st.lists(st.integers(0, 3), min_size=6, max_size=6),
    pin_first=st.booleans(),
    d=st.sampled_from([0.0, 0.5]),
)
def test_reseat_into_fresh_equals_the_document_at_a_time_step(
    old: list[list[list[int]]], new: list[list[int]], batch_docs: list[list[int]],
    seats: list[int], pin_first: bool, d: float,
) -> None:  # fmt: skip
    """Old clusters hold the batch's documents (seated anywhere among them), the last cluster
    is fresh (opened in this batch): the kernel's moves and statistics equal the reference's."""
    beta, log_alpha = 0.1, math.log(0.3)
    batch = DocBatch.from_docs(batch_docs, VOCAB)
    assign = np.array([seats[i] % len(old) for i in range(len(batch_docs))], dtype=np.int64)
    clusters = [list(c) for c in old] + [new]
    for i, slot in enumerate(assign.tolist()):
        clusters[slot].append(batch_docs[i])
    forced = np.full(len(batch_docs), -1, dtype=np.int64)
    forced[-1] = 0 if len(batch_docs) > 2 else -1  # a labelled document never moves
    runs = []
    for use_kernel in (True, False):
        stats = pool(clusters)
        stats.fresh[len(old)] = True
        pinned = np.zeros(stats.m.shape[0], dtype=np.bool_)
        pinned[0] = pin_first
        a = assign.copy()
        if use_kernel:
            kern.reseat_into_fresh(
                batch.ptr, batch.words, batch.counts, batch.lengths, a, forced, pinned,
                stats.m, stats.ntok, stats.alive, stats.fresh, stats.uid, stats.head,
                stats.nxt, stats.pk, stats.pc, stats.ictl, 1.0, beta, VOCAB * beta, log_alpha, d,
            )  # fmt: skip
        else:
            reseat_reference(batch, a, forced, pinned, stats, beta, log_alpha, d)
        slots = list(range(len(clusters)))
        runs.append((a.tolist(), stats.m[slots].tolist(), stats.ntok[slots].tolist(),
                     [stats.word_counts(k)[1].tolist() for k in slots]))  # fmt: skip
    assert runs[0] == runs[1]
