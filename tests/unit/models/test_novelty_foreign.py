"""NoveltyTracker across replicas: other writers' documents count towards a candidate, and a
candidate merged into another writer's cluster lives on as that cluster."""

from __future__ import annotations

import numpy as np
from helpers.novelty_runs import observe

from noveld.daemon.stages.novelty import held_documents, moved_to_others
from noveld.models.base import BatchResult, DocBatch
from noveld.models.dpmm import DPMM, DPMMConfig
from noveld.models.lineage import UID_SLOT_BITS, Lineage
from noveld.models.novelty import NoveltyTracker, seated_by_cluster


def test_documents_other_writers_seated_confirm_a_candidate_at_the_next_batch() -> None:
    """A story spread over replicas: 1 document here, 2 seated by another writer (from its
    applied delta); confirmed once, at this writer's next batch's first document."""
    tr = NoveltyTracker(min_size=3, confirm_within=100)
    assert observe(tr, [(7, 0, 1.0)], [7, 1], first=0) == []
    tr.count_foreign({7: 2, 9: 5})  # 9 is no candidate here: nothing to count
    assert set(tr.candidates) == {7} and tr.candidates[7].size == 3
    out = observe(tr, [], [1, 1], first=10)
    assert [(c.candidate.uid, c.candidate.founding_doc_id, c.confirmed_index) for c in out] == [
        (7, "d0", 10)
    ]
    assert tr.candidates == {}
    tr.count_foreign({7: 3})
    assert observe(tr, [], [7], first=12) == []  # announced once


def test_foreign_documents_alone_below_min_size_confirm_nothing() -> None:
    tr = NoveltyTracker(min_size=3, confirm_within=100)
    observe(tr, [(7, 0, 1.0)], [7], first=0)
    tr.count_foreign({7: 1, 8: 0})
    assert observe(tr, [], [1], first=5) == [] and tr.candidates[7].size == 2


def test_a_candidate_merged_into_another_writers_cluster_lives_on_as_the_survivor() -> None:
    """Reconciliation merges this writer's young cluster 7 into another writer's 900: the
    candidate keeps its founding document, counts the survivor's documents and is announced
    under the survivor — where a plain retirement drops it."""
    tr = NoveltyTracker(min_size=3, confirm_within=100)
    observe(tr, [(7, 0, 1.0)], [7, 7], first=0)
    assert observe(tr, [], [1], first=2, retired=(7,), moved={7: 900}) == []
    assert set(tr.candidates) == {900} and tr.candidates[900].size == 2
    out = observe(tr, [], [900], first=3)
    assert [(c.candidate.uid, c.candidate.founding_doc_id, c.confirmed_index) for c in out] == [
        (900, "d0", 3)
    ]
    dropped = NoveltyTracker(min_size=3, confirm_within=100)
    observe(dropped, [(7, 0, 1.0)], [7, 7], first=0)
    assert observe(dropped, [], [900], first=2, retired=(7,)) == []
    assert dropped.candidates == {} and dropped.dropped == 1


def test_two_candidates_meeting_in_one_survivor_are_one_with_the_earlier_founder() -> None:
    tr = NoveltyTracker(min_size=4, confirm_within=100)
    observe(tr, [(5, 1, 1.0), (7, 0, 1.0)], [7, 5], first=0)
    observe(tr, [], [1], first=2, retired=(5,), moved={5: 7})
    assert list(tr.candidates) == [7]
    cand = tr.candidates[7]
    assert (cand.founding_doc_id, cand.size) == ("d0", 2)
    out = observe(tr, [], [7, 7], first=3)
    assert [c.candidate.founding_doc_id for c in out] == ["d0"]


def test_a_twin_merged_in_brings_its_documents_to_the_candidate() -> None:
    """Two replicas opened one story at once; the other's twin (2 documents) was merged into
    this writer's cluster 7, which holds 3 now: the candidate counts them and is confirmed at
    the batch's last document, where counting its own one document alone waits."""
    tr = NoveltyTracker(min_size=3, confirm_within=100)
    observe(tr, [(7, 0, 1.0)], [7], first=0)
    out = observe(tr, [], [1, 1], first=5, held={7: 3, 8: 9})  # 8: no candidate here
    assert [(c.candidate.uid, c.candidate.founding_doc_id, c.confirmed_index) for c in out] == [
        (7, "d0", 6)
    ]
    alone = NoveltyTracker(min_size=3, confirm_within=100)
    observe(alone, [(7, 0, 1.0)], [7], first=0)
    assert observe(alone, [], [1, 1], first=5) == [] and alone.candidates[7].size == 1


def test_a_batchs_own_documents_are_not_counted_twice_by_the_held_count() -> None:
    """The held count is taken after the step, so it includes the batch's own members: a
    candidate counts the larger of the two, not their sum."""
    tr = NoveltyTracker(min_size=3, confirm_within=100)
    observe(tr, [(7, 0, 1.0)], [7], first=0)
    assert observe(tr, [], [7], first=1, held={7: 2}) == []
    assert tr.candidates[7].size == 2


def test_seated_by_cluster_counts_additions_under_the_survivor() -> None:
    lineage = Lineage()
    lineage.record(5, 3, 0)
    deltas = [([5, 6, 8], [2.0, -1.0, 0.4]), ([3], [1.0])]
    assert seated_by_cluster(deltas, lineage.resolve) == {3: 3}


def test_only_merges_into_another_writers_cluster_move_a_candidate() -> None:
    """A merge between this writer's own clusters retires the source as before (one replica
    behaves as it always did); one into another writer's slot moves it."""
    mine, theirs = (0 << UID_SLOT_BITS) + 7, (1 << UID_SLOT_BITS) + 3
    result = BatchResult(
        assignments=np.zeros(0, dtype=np.int64), born=[], retired=[], delta=None,  # type: ignore[arg-type]
        merged=[(mine, theirs, False), (mine + 1, mine, False)],
    )  # fmt: skip
    lineage = Lineage(own_slots=frozenset({0}))
    assert moved_to_others(result, lineage) == {mine: theirs}
    assert moved_to_others(result, Lineage()) == {}  # one process, one input: no slots
    assert moved_to_others(result, None) == {}


def test_held_documents_reads_each_live_clusters_documents() -> None:
    """The held count is the cluster's mass in the statistics, for the live uids asked."""
    model = DPMM(DPMMConfig())
    stats = model.new_state()
    docs = [[0, 0, 1]] * 3
    res = model.partial_fit(DocBatch.from_docs(docs, 4), stats, np.random.default_rng(0))
    uid = int(res.assignments[0])
    assert res.assignments.tolist() == [uid] * 3
    assert held_documents(stats, [uid, uid + 99]) == {uid: 3}
