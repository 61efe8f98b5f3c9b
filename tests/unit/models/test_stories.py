"""Story summaries (noveld.models.stories): the bucket ring, the fold on merge and the bounds,
checked against a per-document oracle."""

from __future__ import annotations

import numpy as np

from noveld.models.stories import (
    StoryLimits,
    apply_delta,
    fold,
    recent_docs,
    shift,
    sparkline,
    stories_problem,
)
from noveld.models.story_table import StoriesChange, StoryTable, batch_change


def batch_delta(uids, times, ids, texts, lim, have=None):  # type: ignore[no-untyped-def]
    """A batch's change as per-cluster summaries (uid → summary)."""
    ch = batch_change(np.asarray(uids), np.asarray(times, float), ids, texts, lim, have)
    return {int(u): s for u, s in ch.summaries().items()}


TABLE_OF: dict[int, StoryTable] = {}


def apply_change(stories: dict, change: StoriesChange) -> None:
    """Apply a change with the dict oracle and with the table kept beside ``stories``; both
    must end equal (and the table must survive its JSON form)."""
    apply_delta(stories, change.summaries(), change.merges, change.dropped, change.limits)
    lim = change.limits
    table = TABLE_OF.setdefault(id(stories), StoryTable(lim.buckets, lim.bucket_seconds))
    table.apply(change)
    expected = {k: stories[k] for k in sorted(stories, key=int)}
    assert table.to_json() == expected
    assert StoryTable.from_json(expected).to_json() == expected


LIM = StoryLimits(bucket_seconds=10, buckets=5, exemplars=2, terms=3, text_chars=4)


def oracle_counts(times: list[float], lim: StoryLimits) -> tuple[int, list[int]]:
    """Head bucket and ring counted document by document."""
    buckets = [int(np.floor(t / lim.bucket_seconds)) for t in times]
    head = max(buckets)
    ring = [0] * lim.buckets
    for b in buckets:
        age = head - b
        if age < lim.buckets:
            ring[lim.buckets - 1 - age] += 1
    return head, ring


def stream(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    uids = rng.integers(0, 4, n)
    times = np.sort(rng.uniform(1000, 1100, n)).round(3)
    times[rng.random(n) < 0.1] -= 30  # late documents: some fall off the ring
    return uids, times


def run_batches(uids: np.ndarray, times: np.ndarray, size: int, lim: StoryLimits) -> dict:
    stories: dict = {}
    ids = [f"d{i}" for i in range(uids.shape[0])]
    texts = [f"text of d{i}" for i in range(uids.shape[0])]
    for s in range(0, uids.shape[0], size):
        sl = slice(s, s + size)
        apply_change(stories, batch_change(uids[sl], times[sl], ids[sl], texts[sl], lim))
    return stories


def test_batches_folded_equal_the_per_document_oracle() -> None:
    rng = np.random.default_rng(1)
    uids, times = stream(rng, 300)
    for size in (1, 7, 300):
        stories = run_batches(uids, times, size, LIM)
        for u in range(4):
            mine = times[uids == u].tolist()
            head, ring = oracle_counts(mine, LIM)
            s = stories[str(u)]
            assert (s["head"], s["counts"]) == (head, ring), size
            assert s["docs"] == len(mine)
            assert s["born"] == min(mine) and s["last"] == max(mine)
            first = [f"d{i}" for i in np.flatnonzero(uids == u)[:2]]
            assert [e[0] for e in s["exemplars"]] == first
            assert all(len(e[1]) <= LIM.text_chars for e in s["exemplars"])
            assert stories_problem(stories) is None


def test_a_merge_folds_the_two_rings_as_one_cluster() -> None:
    rng = np.random.default_rng(2)
    uids, times = stream(rng, 200)
    stories = run_batches(uids, times, 16, LIM)
    apply_change(stories, StoriesChange(LIM, merges=[(1, 2), (0, 9)], dropped=[3]))
    assert "0" not in stories and stories["9"]["docs"] == int((uids == 0).sum())  # renamed
    assert "1" not in stories and "3" not in stories
    both = times[(uids == 1) | (uids == 2)].tolist()
    head, ring = oracle_counts(both, LIM)
    s = stories["2"]
    assert (s["head"], s["counts"], s["docs"]) == (head, ring, len(both))
    assert len(s["exemplars"]) == LIM.exemplars


def test_shift_moves_the_ring_and_drops_what_falls_off() -> None:
    assert shift([1, 2, 3], 10, 10, 3) == [1, 2, 3]
    assert shift([1, 2, 3], 10, 11, 3) == [2, 3, 0]
    assert shift([1, 2, 3], 10, 13, 3) == [0, 0, 0]
    assert shift([1, 2], 10, 10, 4) == [0, 0, 1, 2]  # a shorter ring (fewer buckets before)
    assert shift([1, 2, 3, 4], 10, 10, 2) == [3, 4]


def test_bounds_terms_exemplars_text_and_the_number_of_stories() -> None:
    lim = StoryLimits(bucket_seconds=10, buckets=3, exemplars=1, terms=2, text_chars=3,
                      exemplar_text=False, max_stories=2)  # fmt: skip
    change = batch_change(np.array([5, 6, 7, 5]), np.array([1.0, 2.0, 3.0, 4.0]),
                          ["a", "b", "c", "d"], ["xxxxx"] * 4, lim)  # fmt: skip
    change.terms[5] = [["w1", 0.5], ["w2", 0.3], ["w3", 0.2]]
    stories: dict = {}
    apply_change(stories, change)
    assert sorted(stories) == ["5", "6"]  # the third cluster found the cap reached
    assert stories["5"]["terms"] == [["w1", 0.5], ["w2", 0.3]]
    assert stories["5"]["exemplars"] == [["a", None]]  # no text kept
    assert stories["5"]["docs"] == 2


def test_exemplars_only_for_the_clusters_that_want_them() -> None:
    have = {1: LIM.exemplars, 2: 1}  # cluster 1 holds all its exemplars already
    delta = batch_delta(np.array([1, 2]), np.array([1.0, 2.0]), ["a", "b"], ["x", "y"], LIM, have)
    assert delta[1]["exemplars"] == [] and delta[2]["exemplars"] == [["b", "y"]]


def test_fold_keeps_the_survivors_terms_and_takes_fresh_ones() -> None:
    a = batch_delta(np.array([1]), np.array([5.0]), ["a"], ["t"], LIM)[1]
    b = batch_delta(np.array([2]), np.array([25.0]), ["b"], ["t"], LIM)[2]
    a["terms"], b["terms"] = [["old", 1.0]], [["new", 1.0]]
    assert fold(a, b, LIM, take_terms=False)["terms"] == [["old", 1.0]]
    assert fold(a, b, LIM, take_terms=True)["terms"] == [["new", 1.0]]
    merged = fold(a, b, LIM, take_terms=False)
    assert merged["head"] == 2 and merged["counts"] == [0, 0, 1, 0, 1]


def test_recent_docs_and_the_sparkline_are_relative_to_now() -> None:
    s = batch_delta(np.array([1, 1, 1]), np.array([5.0, 15.0, 16.0]), ["a", "b", "c"],
                    [None] * 3, LIM)[1]  # fmt: skip
    assert recent_docs(s, 1, 1) == 2 and recent_docs(s, 1, 2) == 3
    assert recent_docs(s, 3, 2) == 0  # the stream moved on: quiet now
    assert sparkline(s, 3, 4) == [1, 2, 0, 0]


def test_a_damaged_summary_is_named() -> None:
    good = batch_delta(np.array([1]), np.array([5.0]), ["a"], ["t"], LIM)[1]
    assert stories_problem({"1": good}) is None
    assert stories_problem([]) is not None
    assert stories_problem({"x": good}) == ("stories", "names 'x', not a cluster uid")
    bad = dict(good, counts=[-1])
    assert stories_problem({"1": bad}) is not None
    assert stories_problem({"1": dict(good, exemplars=[[1, "t"]])}) is not None


def test_the_kernels_match_their_numpy_oracles() -> None:
    from noveld.models.kernels import stories as kern

    rng = np.random.default_rng(3)
    for _ in range(20):
        m, b = int(rng.integers(1, 60)), int(rng.integers(1, 6))
        uids = rng.integers(0, 8, m)
        bucket = rng.integers(100, 110, m)
        times = rng.uniform(0, 1, m)
        order = np.argsort(uids, kind="stable")
        su = uids[order]
        group = np.cumsum(np.r_[True, su[1:] != su[:-1]]) - 1
        k = int(group[-1]) + 1
        got = kern.bucket_groups(order, group, bucket, times, k, b)
        want = kern.bucket_groups_oracle(order, group, bucket, times, k, b)
        for g, w in zip(got, want, strict=True):
            assert np.array_equal(g, w)
        n = 10
        table = [rng.integers(100, 112, n), rng.uniform(0, 1, n), rng.uniform(1, 2, n),
                 rng.integers(0, 9, n), rng.integers(0, 5, (n, b))]  # fmt: skip
        table[0][:2] = kern.FRESH
        rows = rng.permutation(n)[:k].astype(np.int64)
        rows[0] = -1
        mine = [a.copy() for a in table]
        ref = [a.copy() for a in table]
        kern.fold_rows(rows, *mine, *want[:4], want[4])
        kern.fold_rows_oracle(rows, *ref, *want[:4], want[4])
        for g, w in zip(mine, ref, strict=True):
            assert np.array_equal(g, w)


def test_each_document_is_timed_by_its_ts_else_its_sources_else_now() -> None:
    from noveld.daemon.stages.stories import doc_times
    from noveld.schema import Document, SourcePosition

    docs = [Document(id="a", text="x", ts=5.0), Document(id="b", text="x")]
    kafka = [SourcePosition(topic="t", offset=i, ts="1970-01-01T00:00:07Z") for i in range(2)]
    assert doc_times(docs, kafka, 100.0).tolist() == [5.0, 7.0]
    files = [SourcePosition(topic="f", offset=i) for i in range(2)]
    assert doc_times(docs, files, 100.0).tolist() == [5.0, 100.0]
    assert doc_times(docs[1:], files[1:], 100.0).tolist() == [100.0]


def test_source_times_parse_as_parse_rfc3339_does() -> None:
    from noveld.daemon.stages.stories import source_times
    from noveld.schema import format_rfc3339, parse_rfc3339

    rng = np.random.default_rng(3)
    epochs = [*rng.uniform(0, 4e9, 500).tolist(), 0.001, 1e9 + 0.999, 253402300799.999]
    kafka = [format_rfc3339(t) for t in epochs]  # the Kafka source's form: numpy parses them
    want = [round(parse_rfc3339(s), 3) for s in kafka]
    assert np.round(source_times(kafka, 0.0), 3).tolist() == want
    other = [None, "1970-01-01T00:00:07+01:00", "2016-12-31T23:59:60.500Z", kafka[0]]
    assert source_times(other, 9.0).tolist() == [9.0, *(parse_rfc3339(s) for s in other[1:])]
