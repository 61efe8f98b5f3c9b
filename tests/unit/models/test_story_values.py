"""The Redis store's packed story entries: a summary survives packing, and the entries a
writer sends to be taken as they are are what its table holds after the batch."""

from __future__ import annotations

import json

import numpy as np

from noveld.models.stories import StoryLimits
from noveld.models.story_table import StoryTable, batch_change
from noveld.state.redis.story_values import folded, pack_summary, unpack_numbers

LIM = StoryLimits(bucket_seconds=10, buckets=5, exemplars=2, terms=3, max_stories=6)


def test_a_summary_survives_packing_and_damage_is_refused() -> None:
    s = {"born": 1.5, "last": 9.25, "docs": 7, "width": 10, "head": 3, "counts": [0, 2, 0, 5]}
    assert unpack_numbers(pack_summary(s)) == [1.5, 9.25, 7, 10, 3, 0, 2, 0, 5]
    assert unpack_numbers(b"short") is None
    assert unpack_numbers(pack_summary(s) + b"x") is None


def test_folded_entries_are_what_the_table_holds_after_the_batch() -> None:
    rng = np.random.default_rng(4)
    table = StoryTable(LIM.buckets, LIM.bucket_seconds)
    t0 = 1000.0
    for step in range(12):
        n = 20
        uids = rng.integers(0, 9, n)  # more clusters than max_stories: some are left out
        times = np.sort(rng.uniform(t0, t0 + 25, n)).round(3)
        t0 += 15
        ids = [f"d{step}-{i}" for i in range(n)]
        change = batch_change(uids, times, ids, [f"text {i}" for i in ids], LIM)
        if step % 3 == 0:
            change.terms = {int(uids[0]): [["w", 0.5], ["x", 0.25], ["y", 0.1], ["z", 0.1]]}
        table.apply(change)
        done = folded(table, change)
        assert done is not None
        after = table.to_json()
        assert len(after) <= LIM.max_stories
        assert set(done.uids) == {str(u) for u in uids} & set(after)
        size = len(done.entries) // max(len(done.uids), 1)
        for i, uid in enumerate(done.uids):
            s = after[uid]
            want = [s["born"], s["last"], s["docs"], s["width"], s["head"], *s["counts"]]
            assert unpack_numbers(done.entries[i * size : (i + 1) * size]) == want
        for uid, text in done.texts.items():
            assert json.loads(text) == {"t": after[uid]["terms"], "e": after[uid]["exemplars"]}
    change = batch_change(np.array([1]), np.array([t0]), ["m"], ["m"], LIM)
    change.merges = [(1, 2)]
    assert folded(table, change) is None  # merges: the commit script folds them
