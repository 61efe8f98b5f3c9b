"""NoveltyTracker: candidate → confirmed within the window, or dropped."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import numpy as np
import pytest
from helpers.novelty_runs import observe, pos

from noveld.daemon.stages.novelty import others_writing
from noveld.models.lineage import Lineage
from noveld.models.novelty import NoveltyTracker


def test_confirms_at_min_size_with_founder_exemplars_and_position() -> None:
    tr = NoveltyTracker(min_size=3, confirm_within=100)
    out = observe(tr, [(7, 1, 2.5)], [1, 7, 1, 7, 7, 7], first=10)
    assert len(out) == 1
    c = out[0]
    assert c.candidate.founding_doc_id == "d11" and c.candidate.born_index == 11
    assert c.candidate.exemplars == ["d11", "d13", "d14"]
    assert c.confirmed_index == 14 and c.confirmed_at["offset"] == 14
    assert c.candidate.novelty_score == 2.5
    assert tr.candidates == {}  # confirmed once only
    assert observe(tr, [], [7, 7], first=16) == []


def test_confirmation_spans_batches() -> None:
    tr = NoveltyTracker(min_size=3, confirm_within=100)
    assert observe(tr, [(4, 0, 1.0)], [4, 0], first=0) == []
    out = observe(tr, [], [0, 4, 4], first=2)
    assert [c.confirmed_index for c in out] == [4]


def test_a_re_sent_document_does_not_confirm_a_story_on_its_own() -> None:
    """A feed re-sending one article (an update, a producer's retry) under its id: the copies
    join the article's cluster, but a birth needs ``min_size`` distinct documents — across
    batches too, and with the members kept for re-founding or only the exemplars."""
    for features in (None, [(np.array([1]), np.array([1]))] * 4):
        tr = NoveltyTracker(min_size=3, confirm_within=100)
        ids, at = ["a", "a", "b", "a"], [pos(i) for i in range(4)]
        assert tr.observe([(7, 0, 1.0)], [7, 7, 7, 7], ids, at, 0, (), features) == []
        assert tr.candidates[7].size == 2 and tr.candidates[7].exemplars == ["a", "b"]
        out = tr.observe([], [7, 7], ["b", "c"], [pos(4), pos(5)], 4, (), features)
        assert [c.confirmed_index for c in out] == [5]


def test_expires_outside_the_window_and_counts_drops() -> None:
    tr = NoveltyTracker(min_size=3, confirm_within=5)
    observe(tr, [(4, 0, 1.0)], [4, 0, 0], first=0)
    out = observe(tr, [], [0, 0, 4, 4], first=3)  # third member at index 5: outside the window
    assert out == [] and tr.dropped == 1 and tr.candidates == {}


def test_retired_candidates_are_dropped() -> None:
    tr = NoveltyTracker(min_size=2, confirm_within=100)
    observe(tr, [(9, 0, 1.0)], [9], first=0, retired=(9,))
    assert tr.candidates == {} and tr.dropped == 1


def test_min_size_one_confirms_at_birth() -> None:
    tr = NoveltyTracker(min_size=1, confirm_within=10)
    out = observe(tr, [(3, 0, 0.5)], [3], first=0)
    assert len(out) == 1 and out[0].confirmed_index == out[0].candidate.born_index == 0


def test_state_round_trips_through_json() -> None:
    import json

    tr = NoveltyTracker(min_size=3, confirm_within=100)
    observe(tr, [(4, 0, 1.0), (5, 1, 2.0)], [4, 5, 4], first=0)
    restored = NoveltyTracker(min_size=3, confirm_within=100)
    restored.load_json(json.loads(json.dumps(tr.to_json())))
    a = observe(tr, [], [4, 5, 5], first=3)
    b = observe(restored, [], [4, 5, 5], first=3)
    assert [c.candidate.uid for c in a] == [c.candidate.uid for c in b] == [4, 5]


def test_rejects_nonsense_settings() -> None:
    with pytest.raises(ValueError):
        NoveltyTracker(min_size=0)
    with pytest.raises(ValueError):
        NoveltyTracker(confirm_within=0)


def _observe_with_words(
    tr: NoveltyTracker,
    births: list[tuple[int, int, float]],
    assign: list[int],
    first: int,
    fits: Any,
) -> list[Any]:
    ids = [f"d{first + i}" for i in range(len(assign))]
    feats = [(np.array([first + i]), np.array([1])) for i in range(len(assign))]
    return tr.observe(
        births, assign, ids, [pos(first + i) for i in range(len(assign))], first, (), feats, fits
    )


def test_refound_moves_the_founding_doc_to_the_first_member_that_fits() -> None:
    tr = NoveltyTracker(min_size=3, confirm_within=100)
    asked: list[int] = []

    def fits(uid: int, words: np.ndarray, counts: np.ndarray) -> bool:
        asked.append(int(words[0]))
        return int(words[0]) != 10  # d10 is the stray that opened the cluster

    assert _observe_with_words(tr, [(7, 0, 1.5)], [7, 1, 1], 10, fits) == []
    out = _observe_with_words(tr, [], [1, 7, 7], 13, fits)
    assert len(out) == 1
    cand = out[0].candidate
    assert asked == [10, 14]  # stops at the first member that fits
    assert cand.founding_doc_id == "d14" and cand.born_index == 14
    assert cand.born_at["offset"] == 14 and cand.novelty_score == 1.5
    assert [m["doc_id"] for m in cand.members] == ["d10", "d14", "d15"]


def test_refound_keeps_the_founder_when_it_fits_or_nothing_does() -> None:
    for verdict in (True, False):
        tr = NoveltyTracker(min_size=2, confirm_within=100)
        out = _observe_with_words(tr, [(3, 0, 1.0)], [3, 3], 0, lambda *_, v=verdict: v)
        assert out[0].candidate.founding_doc_id == "d0"


def test_members_survive_the_json_round_trip() -> None:
    tr = NoveltyTracker(min_size=3, confirm_within=100)
    _observe_with_words(tr, [(5, 0, 1.0)], [5, 5], 0, lambda *_: True)
    back = NoveltyTracker(min_size=3, confirm_within=100)
    back.load_json(json.loads(json.dumps(tr.to_json())))
    out = _observe_with_words(back, [], [5], 2, lambda uid, w, c: int(w[0]) == 1)
    assert out[0].candidate.founding_doc_id == "d1"


def test_the_json_state_is_asdict_and_does_not_follow_the_tracker() -> None:
    """``to_json`` (built without ``asdict`` for speed: every shared-store commit carries it) is
    what ``asdict`` gives (without the held confirmation's fields while not held: a state
    without held births reads as before they existed), and later batches do not change a
    state already taken."""
    tr = NoveltyTracker(min_size=3, confirm_within=100)
    _observe_with_words(tr, [(5, 0, 1.0)], [5], 0, lambda *_: True)
    taken = tr.to_json()
    held = ("confirmed_at", "confirmed_index", "release_at")
    unheld = [{k: v for k, v in asdict(c).items() if k not in held} for c in tr.candidates.values()]
    assert taken["candidates"] == unheld
    before = json.dumps(taken)
    _observe_with_words(tr, [], [5], 1, lambda *_: True)
    assert tr.candidates[5].size == 2 and json.dumps(taken) == before


def test_a_held_birth_is_announced_once_under_the_survivor_of_its_merge() -> None:
    """Replicas (hold_docs): two writers' births of one story, confirmed in one round, are held
    until the namespace counted hold_docs more documents; by then one was merged into the
    other, and the survivor is announced once, with the earlier founding document; a held
    birth whose cluster is gone is dropped; the held state survives a JSON round trip."""
    tr = NoveltyTracker(min_size=2, confirm_within=100, hold_docs=20)
    # uid 5 and uid 9 (another writer's twin this tracker took over) confirm at once: held
    assert observe(tr, [(9, 0, 1.0), (5, 2, 1.0)], [9, 9, 5, 5, 3], first=10) == []
    assert observe(tr, [(4, 0, 1.0)], [4, 4], first=20) == []  # 4 held as well
    tr2 = NoveltyTracker(min_size=2, confirm_within=100, hold_docs=20)
    tr2.load_json(json.loads(json.dumps(tr.to_json())))
    merged = {9: 5}  # 9 merged into 5; 4 retired
    out = tr2.observe(
        [], [1], ["d40"], [pos(40)], 40, (),
        resolve=lambda u: None if u == 4 else merged.get(u, u),
    )  # fmt: skip
    assert [(c.candidate.uid, c.candidate.founding_doc_id) for c in out] == [(5, "d10")]
    assert out[0].confirmed_index == 11
    assert tr2.candidates.keys() == {4}  # not due yet (confirmed at 21, due at 42)
    out = tr2.observe([], [1], ["d42"], [pos(42)], 42, (), resolve=lambda u: None)
    assert out == [] and tr2.dropped == 1 and not tr2.candidates


def test_births_are_held_only_while_another_writer_opens_clusters() -> None:
    """A writer holding every input's uid slot has no twin to wait for: it announces at once."""
    tr = NoveltyTracker(min_size=2, confirm_within=100, hold_docs=20)
    out = tr.observe([(5, 0, 1.0)], [5, 5], ["a", "b"], [pos(0), pos(1)], 0, hold=False)
    assert [c.candidate.uid for c in out] == [5]
    lineage = Lineage(young={1 << 40 | 3: 0}, own_slots=frozenset({0}))
    assert others_writing(lineage)
    lineage.own_slots = frozenset({0, 1})
    assert not others_writing(lineage)
    lineage.own_slots = None  # one process, one input: no slots to tell apart
    assert not others_writing(lineage)


def test_a_held_birth_is_re_founded_in_the_cluster_it_was_merged_into() -> None:
    """At its release a held birth asks its members again, of the cluster it lives on in now:
    the opener d10 fitted its own young cluster at confirmation, but not the survivor that a
    twin of the story was merged into meanwhile, so d11 founds the announced story."""
    tr = NoveltyTracker(min_size=3, confirm_within=100, hold_docs=20)
    asked: list[tuple[int, int]] = []

    def fits(uid: int, words: np.ndarray, counts: np.ndarray) -> bool:
        asked.append((uid, int(words[0])))
        return uid == 7 or int(words[0]) != 10

    assert _observe_with_words(tr, [(7, 0, 1.0)], [7, 7, 7], 10, fits) == []  # held
    assert tr.candidates[7].founding_doc_id == "d10" and asked == [(7, 10)]
    out = tr.observe(
        [], [1], ["d40"], [pos(40)], 40, (), [(np.array([40]), np.array([1]))], fits,
        resolve=lambda u: 5 if u == 7 else u,
    )  # fmt: skip
    assert [(c.candidate.uid, c.candidate.founding_doc_id) for c in out] == [(5, "d11")]
    assert out[0].candidate.born_index == 11 and asked[1:] == [(5, 10), (5, 11)]
