"""``noveld.eval.novelty``: novelty precision/recall/latency, the known-label split and known F1,
each on small hand-worked streams."""

from __future__ import annotations

import math

import numpy as np
import pytest

from noveld.eval.novelty import known_f1, novelty_scores, split_known

#         0    1    2    3    4    5    6    7    8    9   10   11
STREAM = ["a", "a", "b", "a", "b", "a", "a", "a", "c", "b", "c", "c"]
# a: docs 0 1 3 5 6 7 (first at 0) · b: docs 2 4 9 (first at 2) · c: docs 8 10 11 (first at 8)


def test_hand_worked_stream() -> None:
    births = [
        (0, 3),  # a, rank 0 → qualifies; confirmed at 3
        (7, 9),  # a, rank 5 → outside W=3 → wrong
        (4, 10),  # b, rank 1 → qualifies; confirmed at 10
        (3, 6),  # a, rank 2 → qualifies; confirmed at 6 (a's earliest stays 3)
    ]
    s = novelty_scores(STREAM, births, window=3)
    assert s["births"] == 4.0
    assert s["true_clusters"] == 3.0
    assert s["novelty_precision"] == pytest.approx(3 / 4)
    assert s["novelty_recall"] == pytest.approx(2 / 3)  # a and b detected, c missed
    # latencies: a = 3 − 0 = 3, b = 10 − 2 = 8 → median 5.5
    assert s["novelty_latency_docs"] == pytest.approx(5.5)


def test_window_decides_what_qualifies() -> None:
    births = [(7, 9)]  # a's 6th document (rank 5)
    assert novelty_scores(STREAM, births, window=5)["novelty_precision"] == 0.0
    s = novelty_scores(STREAM, births, window=6)
    assert s["novelty_precision"] == 1.0
    assert s["novelty_recall"] == pytest.approx(1 / 3)
    assert s["novelty_latency_docs"] == 9.0  # 9 − first doc of a (0)


def test_latency_uses_earliest_confirmation_not_earliest_founding() -> None:
    # Two qualifying births for c: founded at 8 but confirmed late, founded at 10 confirmed at 11.
    s = novelty_scores(STREAM, [(8, 11), (10, 10)], window=5)
    assert s["novelty_latency_docs"] == 2.0  # min(11, 10) − 8
    assert s["novelty_recall"] == pytest.approx(1 / 3)
    assert s["novelty_precision"] == 1.0


def test_median_over_odd_number_of_clusters() -> None:
    s = novelty_scores(STREAM, [(0, 0), (2, 4), (8, 11)], window=1)
    assert s["novelty_recall"] == 1.0
    assert s["novelty_precision"] == 1.0
    assert s["novelty_latency_docs"] == 2.0  # median of 0, 2, 3


def test_no_births() -> None:
    s = novelty_scores(STREAM, [])
    assert s["novelty_precision"] == 0.0
    assert s["novelty_recall"] == 0.0
    assert math.isnan(s["novelty_latency_docs"])
    assert s["births"] == 0.0
    assert s["true_clusters"] == 3.0


def test_empty_stream() -> None:
    s = novelty_scores([], [])
    assert s["novelty_precision"] == 0.0
    assert s["novelty_recall"] == 0.0
    assert math.isnan(s["novelty_latency_docs"])
    assert s["true_clusters"] == 0.0


def test_only_wrong_births() -> None:
    s = novelty_scores(STREAM, [(7, 8), (11, 11)], window=2)
    assert s["novelty_precision"] == 0.0
    assert s["novelty_recall"] == 0.0
    assert math.isnan(s["novelty_latency_docs"])
    assert s["births"] == 2.0


def test_keys_are_the_report_keys() -> None:
    assert set(novelty_scores(STREAM, [(0, 1)])) == {
        "novelty_precision",
        "novelty_recall",
        "novelty_latency_docs",
        "births",
        "true_clusters",
    }


@pytest.mark.parametrize("births", [[(12, 12)], [(-1, 3)], [(0, 12)], [(5, 4)]])
def test_invalid_births_raise(births: list[tuple[int, int]]) -> None:
    with pytest.raises(ValueError):
        novelty_scores(STREAM, births)


def test_invalid_window_raises() -> None:
    with pytest.raises(ValueError):
        novelty_scores(STREAM, [], window=0)


# ----------------------------------------------------------------------------- split_known

LABELS = [f"k{i % 6}" for i in range(600)]  # six classes of 100 documents each


def test_split_known_chooses_half_the_classes_and_the_fraction() -> None:
    known, mask = split_known(LABELS, 0.3, seed=7)
    assert len(known) == 3
    assert known <= set(LABELS)
    assert mask.dtype == np.bool_
    assert mask.shape == (600,)
    revealed = [lab for lab, m in zip(LABELS, mask, strict=True) if m]
    assert set(revealed) == known  # only known classes are ever revealed
    for c in known:
        assert revealed.count(c) == 30  # round(0.3 × 100)


def test_split_known_is_deterministic_and_seeded() -> None:
    a = split_known(LABELS, 0.5, seed=1)
    b = split_known(LABELS, 0.5, seed=1)
    assert a[0] == b[0]
    assert np.array_equal(a[1], b[1])
    others = [split_known(LABELS, 0.5, seed=s) for s in range(2, 8)]
    assert any(o[0] != a[0] or not np.array_equal(o[1], a[1]) for o in others)


def test_split_known_edge_fractions_and_odd_class_counts() -> None:
    labels = ["x", "y", "z", "x", "y", "z", "x"]  # 3 classes → 1 known
    known, mask = split_known(labels, 0.0, seed=0)
    assert len(known) == 1
    assert not mask.any()
    known, mask = split_known(labels, 1.0, seed=0)
    assert [lab for lab, m in zip(labels, mask, strict=True) if m] == [
        lab for lab in labels if lab in known
    ]
    assert split_known(["only"], 1.0, seed=0)[0] == set()  # one class: none known
    with pytest.raises(ValueError):
        split_known(labels, 1.5, seed=0)


# ----------------------------------------------------------------------------- known_f1


def test_known_f1_hand_worked() -> None:
    true = ["a", "a", "a", "b", "b", "n", "n", "a"]
    pred: list[str | None] = ["a", "a", "b", "b", None, "a", None, "a"]
    unrevealed = [True, True, True, True, True, True, True, False]  # last doc was revealed
    # a: TP 2 (docs 0, 1), FN 1 (doc 2), FP 1 (doc 5) → F1 = 4/6
    # b: TP 1 (doc 3), FN 1 (doc 4), FP 1 (doc 2)    → F1 = 2/4
    f1 = known_f1(true, pred, {"a", "b"}, unrevealed)
    assert f1 == pytest.approx((4 / 6 + 2 / 4) / 2)
    assert known_f1(true, pred, {"a"}, np.array(unrevealed)) == pytest.approx(4 / 6)


def test_known_f1_perfect_and_undefined() -> None:
    true = ["a", "b", "n"]
    assert known_f1(true, ["a", "b", None], {"a", "b"}, [True] * 3) == 1.0
    # class c never occurs and is never predicted → left out of the average
    assert known_f1(true, ["a", "b", None], {"a", "b", "c"}, [True] * 3) == 1.0
    assert known_f1(true, ["a", None, None], {"a", "b"}, [True] * 3) == pytest.approx(0.5)
    assert math.isnan(known_f1(true, ["a", "b", None], {"a", "b"}, [False] * 3))
    with pytest.raises(ValueError):
        known_f1(true, ["a"], {"a"}, [True] * 3)


def test_split_then_score_round_trip() -> None:
    known, revealed = split_known(LABELS, 0.25, seed=3)
    oracle: list[str | None] = [lab if lab in known else None for lab in LABELS]
    assert known_f1(LABELS, oracle, known, ~revealed) == 1.0
    nothing: list[str | None] = [None] * len(LABELS)
    assert known_f1(LABELS, nothing, known, ~revealed) == 0.0
