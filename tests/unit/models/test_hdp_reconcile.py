"""``hdp`` replicas reconciling concurrent births: two writers opening a category for one story
at once end with one category, the lower uid surviving, merged away only by the writer that
opened it; both end with identical statistics; a lone writer merges exactly as before."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from helpers.replicas import SLOT_BITS, Replica, resolved_clusters, run_rounds, story_stream

from noveld.eval.metrics import clustering_scores
from noveld.models.base import DocBatch
from noveld.models.dpmm import DPMMConfig, replay_delta
from noveld.models.hdp import HDP, HDPConfig, is_topic
from noveld.models.hdp.batch_state import topic_offset
from noveld.models.suffstats import MultinomialStats
from noveld.state.base import NamespaceState, state_digest

TOPICS = 64  # ids 0 .. TOPICS − 1 are the topics' entries; words follow
VOCAB = 400


def hdp(young_steps: int = DPMMConfig.young_steps) -> HDP:
    """The model on small states: L·ζ = 1, as the defaults keep it."""
    model = HDP(HDPConfig(topics=TOPICS, zeta=1.0 / TOPICS, young_steps=young_steps))
    model.bind_topic_words(list(range(TOPICS)))
    return model


def batch(docs: list[tuple[int, list[int], int]]) -> DocBatch:
    return DocBatch.from_docs([[TOPICS + w for w in d] for _, d, _ in docs], TOPICS + VOCAB)


def run_two_replicas(seed: int, young_steps: int = DPMMConfig.young_steps):
    model = hdp(young_steps)
    a, b, log, story_of = run_rounds(model, seed, VOCAB, lambda docs, _: batch(docs))
    return model, a, b, log, story_of


def digest(stats: MultinomialStats) -> str:
    return state_digest(NamespaceState({}, stats))


def categories(stats: MultinomialStats) -> dict[int, tuple[float, dict[int, float]]]:
    """Each live category's tables and category–topic counts."""
    out = {}
    for k in stats.active_slots().tolist():
        if not is_topic(stats.uid[k : k + 1])[0]:
            ws, cs = stats.word_counts(int(k))
            out[int(stats.uid[k])] = (
                float(stats.m[k]),
                dict(zip(ws.tolist(), cs.tolist(), strict=True)),
            )
    return out


def test_two_hdp_replicas_join_concurrent_births_and_agree() -> None:
    model, a, b, log, story_of = run_two_replicas(seed=7)
    for r in (a, b):  # a replica merges away only categories it opened itself
        assert all(s >> SLOT_BITS == r.slot for s, _ in r.merges)
    assert not a.merges  # a's uids are the lower ones: a's categories survive
    assert any(d >> SLOT_BITS == a.slot for _, d in b.merges)
    fresh = model.new_state()
    for _, d in log:  # a process restarting from an empty checkpoint replays the log in order
        replay_delta(fresh, d, 0.0)
    assert digest(a.stats) == digest(b.stats) == digest(fresh)
    assigned = {**a.assigned, **b.assigned}
    final = resolved_clusters(a, assigned)
    assert final == resolved_clusters(b, assigned)
    assert set(final.values()) <= set(categories(a.stats))
    clusters_of_story: dict[int, set[int]] = {}
    for d, u in final.items():
        clusters_of_story.setdefault(story_of[d], set()).add(u)
    split = sum(len({u >> SLOT_BITS for u in c}) > 1 for c in clusters_of_story.values())
    assert split <= 1  # of 12 stories, all of which both writers opened at once


def test_without_reconciliation_hdp_replicas_keep_concurrent_births_apart() -> None:
    """The oracle of the test above: with young_steps 0 the replicas agree on the statistics
    but keep a story's concurrent births as separate categories."""
    _, a, b, _, story_of = run_two_replicas(seed=7, young_steps=0)
    assert digest(a.stats) == digest(b.stats)
    assert not a.merges and not b.merges
    apart = resolved_clusters(a, {**a.assigned, **b.assigned})
    _, a, b, _, _ = run_two_replicas(seed=7)
    together = resolved_clusters(a, {**a.assigned, **b.assigned})
    assert len(set(apart.values())) >= 30 and len(set(together.values())) <= 20  # 12 stories
    docs = sorted(apart)
    labels = [story_of[d] for d in docs]
    nmi_apart = clustering_scores(labels, [apart[d] for d in docs])["nmi"]
    nmi_together = clustering_scores(labels, [together[d] for d in docs])["nmi"]
    assert nmi_together > nmi_apart + 0.05  # 0.95 against 0.86


def test_a_lone_hdp_writer_merges_as_without_reconciliation() -> None:
    """One writer seating both writers' documents: the same categories, assignments and
    merges whether other writers' births would be tested or not (there are none)."""
    runs = []
    for young in (DPMMConfig.young_steps, 0):
        model = hdp(young)
        stats = model.new_state()
        rng = np.random.default_rng(5)
        out = []
        for docs_a, docs_b in story_stream(5, VOCAB):
            res = model.partial_fit(batch(docs_a + docs_b), stats, rng)
            out.append((res.assignments.tolist(), res.born, res.merged))
        runs.append((out, categories(stats)))
    assert runs[0] == runs[1]
    assert len(runs[0][1]) < 24  # merges inside each batch still join a story's births


def test_writers_of_other_uid_slots_claim_other_topics() -> None:
    """The first category each writer opens on an empty pool claims its first unused topic
    from a rotation by the writer's uid slot: slot 0 topic 0, other slots elsewhere."""
    offsets = [topic_offset(slot << SLOT_BITS, TOPICS) for slot in range(4)]
    assert offsets[0] == 0 and len(set(offsets)) == 4
    docs = [(0, [1, 2, 3], 0), (1, [1, 2, 4], 0)]
    for slot, offset in enumerate(offsets):
        replica = Replica(hdp(), slot)
        replica.fit(batch(docs), [0, 1], np.random.default_rng(0))
        topics = {
            int(replica.stats.uid[k]) & ((1 << SLOT_BITS) - 1)
            for k in replica.stats.active_slots().tolist()
            if is_topic(replica.stats.uid[k : k + 1])[0]
        }
        assert min(topics) == offset


def test_one_writer_of_two_partitions_joins_their_concurrent_births() -> None:
    """One writer holding two input partitions (uid slots 0 and 1, both its own) seats each
    round's documents in two batches, one per partition: the second batch sees the first's
    births, so fewer stories open twice than on two replicas, and those are joined as two
    replicas' are (17 categories against 18)."""
    counts = []
    for young in (DPMMConfig.young_steps, 0):
        model = hdp(young)
        p0, p1 = Replica(model, 0), Replica(model, 1)
        p1.stats = p0.stats
        p0.stats.lineage.own_slots = frozenset({0, 1})
        rng = np.random.default_rng(7)
        for docs_0, docs_1 in story_stream(7, VOCAB):
            p0.fit(batch(docs_0), [i for i, _, _ in docs_0], rng)
            p1.fit(batch(docs_1), [i for i, _, _ in docs_1], rng)
        if young:
            assert p1.merges and all(s >> SLOT_BITS == 1 for s, _ in p1.merges)
        counts.append(len(set(resolved_clusters(p0, {**p0.assigned, **p1.assigned}).values())))
    assert counts[0] < counts[1]


def test_replicas_with_vectors_join_concurrent_births_and_agree() -> None:
    """With a vMF term per category, each story's vectors near a direction of its own: the
    merge test adds the vectors' gain, and the replicas still join the concurrent births and
    replay to identical statistics."""
    p = 8
    model = HDP(HDPConfig(topics=TOPICS, zeta=1.0 / TOPICS, dimension=p))
    model.bind_topic_words(list(range(TOPICS)))
    base = TOPICS + VOCAB
    model.bind_dimension_words(
        list(range(base, base + p)), list(range(base + p, base + 2 * p)), base + 2 * p
    )
    centres = np.random.default_rng(3).normal(size=(12, p)) * 3.0
    noise = np.random.default_rng(4)

    def vector_batch(docs: list[tuple[int, list[int], int]], _: int) -> DocBatch:
        x = centres[[s for _, _, s in docs]] + noise.normal(size=(len(docs), p))
        emb = x / np.linalg.norm(x, axis=1, keepdims=True)
        b = DocBatch.from_docs([[TOPICS + w for w in d] for _, d, _ in docs], base + 2 * p + 1)
        return replace(b, emb=emb)

    a, b, log, story_of = run_rounds(model, 7, VOCAB, vector_batch)
    assert any(d >> SLOT_BITS == a.slot for _, d in b.merges)  # births joined across writers
    fresh = model.new_state()
    for _, d in log:
        replay_delta(fresh, d, 0.0)
    assert digest(a.stats) == digest(b.stats) == digest(fresh)
    assigned = {**a.assigned, **b.assigned}
    final = resolved_clusters(a, assigned)
    labels = [story_of[d] for d in final]
    assert clustering_scores(labels, list(final.values()))["nmi"] > 0.9
