"""Replicas reconciling concurrent births: two writers seating their own documents and taking
in each other's deltas in log order, as the Redis commit does, end with identical statistics
and no story split between them, whichever replica decided a merge; merge chains resolve alike
in every order; the merged-into map and the young clusters stay bounded."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from helpers.replicas import SLOT_BITS, resolved_clusters, run_rounds

from noveld.models.base import DocBatch, StatsDelta
from noveld.models.dpmm import DPMM, DPMMConfig, replay_delta
from noveld.models.hybrid import HybridConfig, HybridMixture
from noveld.models.kernels import multinomial as kern
from noveld.models.lineage import MAX_YOUNG, MERGE_MEMORY_STEPS, Lineage
from noveld.models.suffstats import MultinomialStats
from noveld.state.base import NamespaceState, state_digest

VOCAB = 400
P = 8  # the hybrid's vector dimension: word ids are shifted past its 2P reserved entries


def digest(stats: MultinomialStats) -> str:
    return state_digest(NamespaceState({}, stats))


def assert_same(a: MultinomialStats, b: MultinomialStats, hybrid: bool) -> None:
    """Bit-identical statistics; the hybrid's vector sums (floats added in each replica's own
    order) equal up to rounding, in the same clusters."""
    if not hybrid:
        assert digest(a) == digest(b)
        return

    def table(s: MultinomialStats) -> dict[int, tuple[float, float, dict[int, float]]]:
        out = {}
        for k in s.active_slots().tolist():
            ws, cs = s.word_counts(int(k))
            words = dict(zip(ws.tolist(), cs.tolist(), strict=True))
            out[int(s.uid[k])] = (float(s.m[k] * s.scale), float(s.ntok[k] * s.scale), words)
        return out

    ta, tb = table(a), table(b)
    assert ta.keys() == tb.keys()
    for u, (m, n, words) in ta.items():
        assert (m, n) == tb[u][:2] and words.keys() == tb[u][2].keys()
        assert all(abs(c - tb[u][2][w]) < 1e-9 for w, c in words.items())


def hybrid_model(young_steps: int) -> HybridMixture:
    """The default likelihood on small states (merges on, as the daemon builds it)."""
    cfg = HybridConfig(alpha=0.05, beta=0.05, alpha_scaling="none", young_steps=young_steps,
                       dimension=P, cosine=0.6, merge=True)  # fmt: skip
    model = HybridMixture(cfg)
    model.bind_dimension_words(list(range(0, 2 * P, 2)), list(range(1, 2 * P, 2)))
    model.uncounted_words = lambda: np.arange(2 * P)  # as the pipeline binds it
    return model


def story_vectors(seed: int, docs: list[tuple[int, list[int], int]]) -> np.ndarray:
    """A unit vector per document near its story's direction (12 stories, fixed directions)."""
    centres = np.random.default_rng(99).standard_normal((12, P))
    rng = np.random.default_rng(seed)
    x = centres[[s for _, _, s in docs]] + 0.3 * rng.standard_normal((len(docs), P))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def run_two_replicas(seed: int, young_steps: int = DPMMConfig.young_steps, hybrid: bool = False):
    model: DPMM | HybridMixture
    if hybrid:
        model = hybrid_model(young_steps)
    else:
        model = DPMM(
            DPMMConfig(alpha=0.05, beta=0.05, alpha_scaling="none", young_steps=young_steps)
        )

    def batch(docs: list[tuple[int, list[int], int]], emb_seed: int) -> DocBatch:
        words = [d for _, d, _ in docs]
        if not hybrid:
            return DocBatch.from_docs(words, VOCAB)
        # the hybrid: words past the dimensions' entries, and a vector per document
        b = DocBatch.from_docs([[2 * P + w for w in d] for d in words], 2 * P + VOCAB)
        emb = story_vectors(emb_seed, docs)
        return DocBatch(b.ptr, b.words, b.counts, b.lengths, 2 * P + VOCAB, 2 * P, emb=emb)

    a, b, log, story_of = run_rounds(model, seed, VOCAB, lambda docs, r: batch(docs, seed + r))
    return model, a, b, log, story_of


@pytest.mark.parametrize("hybrid", [False, True], ids=["words", "hybrid"])
def test_two_replicas_converge_to_identical_statistics_and_join_their_births(hybrid: bool) -> None:
    model, a, b, log, story_of = run_two_replicas(seed=7, hybrid=hybrid)
    for r in (a, b):  # a replica merges away only clusters it opened itself
        assert all(s >> SLOT_BITS == r.slot for s, _ in r.merges)
    # b merged its births into a's (a's uids are lower: a's survive)
    assert any(d >> SLOT_BITS == a.slot for _, d in b.merges)
    fresh = model.new_state()
    for _, d in log:  # a process restarting from an empty checkpoint replays the log in order
        replay_delta(fresh, d, 0.0, uncounted=model.uncounted_words)
    assert_same(a.stats, b.stats, hybrid)
    assert_same(a.stats, fresh, hybrid)
    assigned = {**a.assigned, **b.assigned}
    final = resolved_clusters(a, assigned)
    assert final == resolved_clusters(b, assigned)
    clusters_of_story: dict[int, set[int]] = {}
    for d, u in final.items():
        clusters_of_story.setdefault(story_of[d], set()).add(u)
    # no story is left with clusters of both writers (uid slot = uid >> SLOT_BITS); the
    # hybrid keeps up to 3 of 12 apart where its merge test (words + vectors) says they differ,
    # against 10 of 12 without reconciliation
    split = sum(len({u >> SLOT_BITS for u in c}) > 1 for c in clusters_of_story.values())
    assert split <= (3 if hybrid else 0)
    live = {int(a.stats.uid[k]) for k in a.stats.active_slots().tolist()}
    assert set(final.values()) <= live


@pytest.mark.parametrize("hybrid", [False, True], ids=["words", "hybrid"])
def test_without_reconciliation_concurrent_births_stay_apart(hybrid: bool) -> None:
    """The oracle of the test above: with young_steps 0 the replicas still agree on the
    statistics but keep a story's concurrent births as separate clusters."""
    _, a, b, _, _ = run_two_replicas(seed=7, young_steps=0, hybrid=hybrid)
    assert_same(a.stats, b.stats, hybrid)
    apart = len(set(resolved_clusters(a, {**a.assigned, **b.assigned}).values()))
    _, a, b, _, _ = run_two_replicas(seed=7, hybrid=hybrid)
    together = len(set(resolved_clusters(a, {**a.assigned, **b.assigned}).values()))
    assert together <= 13 and apart >= 21  # 12 stories


def add(uid: int, word: int, born: bool, n_docs: int = 1) -> StatsDelta:
    """A delta adding ``n_docs`` documents of one word to cluster ``uid``."""
    return StatsDelta(
        decay=1.0,
        cluster_uids=np.array([uid]),
        dm=np.array([float(n_docs)]),
        dntok=np.array([float(n_docs)]),
        word_cluster=np.array([0]),
        word_ids=np.array([word]),
        word_count=np.array([float(n_docs)]),
        born_uids=np.array([uid] if born else [], dtype=np.int64),
        retired_uids=np.zeros(0, dtype=np.int64),
    )


def merge(src: int, dst: int) -> StatsDelta:
    """A delta of no document that merges ``src`` into ``dst``."""
    empty = np.zeros(0, dtype=np.int64)
    return StatsDelta(
        decay=1.0,
        cluster_uids=empty,
        dm=np.zeros(0),
        dntok=np.zeros(0),
        word_cluster=empty,
        word_ids=empty,
        word_count=np.zeros(0),
        born_uids=empty,
        retired_uids=np.array([src]),
        n_docs=0,
        merges=np.array([[src, dst]]),
    )


def test_merge_chains_resolve_alike_in_every_order() -> None:
    """Three births of one story (uids 1, 2, 3) and merges decided on different replicas
    (3→2, 2→1, 3→1, and a late addition to 3): every order of the merges ends with one
    cluster, uid 1, holding every count."""
    births = [add(1, 10, True), add(2, 10, True), add(3, 11, True)]
    merges = [merge(3, 2), merge(2, 1), merge(3, 1)]
    late = add(3, 12, False, n_docs=2)  # written by a replica that had not seen 3 merge
    digests = set()
    for order in itertools.permutations([*merges, late]):
        stats = MultinomialStats()
        for d in [*births, *order]:
            replay_delta(stats, d, 0.0)
        live = stats.active_slots()
        assert [int(stats.uid[k]) for k in live.tolist()] == [1]
        assert float(stats.m[live[0]]) == 5.0
        digests.add(digest(stats))
    assert len(digests) == 1


def test_opposite_decisions_of_one_merge_keep_the_lower_uid() -> None:
    """Two replicas decide one merge in opposite directions (a stale view): after both
    deltas, in either order, the lower uid survives with every count."""
    for first, second in [(merge(5, 4), merge(4, 5)), (merge(4, 5), merge(5, 4))]:
        stats = MultinomialStats()
        for d in [add(4, 1, True), add(5, 2, True), first, second]:
            replay_delta(stats, d, 0.0)
        live = [int(stats.uid[k]) for k in stats.active_slots().tolist()]
        assert len(live) == 1 and float(stats.m[stats.active_slots()[0]]) == 2.0


def test_the_merged_into_map_and_the_young_clusters_stay_bounded() -> None:
    lineage = Lineage()
    for step in range(3 * MERGE_MEMORY_STEPS):
        lineage.record(step + 1_000_000, step, step)
    assert len(lineage.merged_into) <= MERGE_MEMORY_STEPS + 64
    assert lineage.resolve(3 * MERGE_MEMORY_STEPS - 1 + 1_000_000) == 3 * MERGE_MEMORY_STEPS - 1
    for u in range(2 * MAX_YOUNG):
        lineage.add_young(u, step=u)
    assert len(lineage.young) == MAX_YOUNG
    assert len(lineage.current(100, 2 * MAX_YOUNG - 1)) == 100
    assert lineage.current(100, 3 * MAX_YOUNG) == {}


def test_words_of_clusters_matches_the_per_cluster_oracle() -> None:
    """The one-pass kernel against the union of :func:`kern.cluster_word_counts`."""
    _, a, _, _, _ = run_two_replicas(seed=3)
    stats = a.stats
    rng = np.random.default_rng(0)
    for _ in range(5):
        member = rng.random(stats.kmax) < 0.3
        oracle = [
            kern.cluster_word_counts(k, stats.head, stats.nxt, stats.pk, stats.pc)[0]
            for k in np.flatnonzero(member & stats.alive[: stats.kmax]).tolist()
        ]
        want = np.unique(np.concatenate([np.zeros(0, dtype=np.int64), *oracle]))
        got = kern.words_of_clusters(member, stats.head, stats.nxt, stats.pk, stats.pc)
        assert np.array_equal(got, want)
