"""``noveld.eval.metrics`` against hand-worked examples, identities and slow reference formulas.

The references below are written from the textbook definitions (explicit probability sums for
entropies and mutual information, conditional entropies for homogeneity/completeness, pair
counting with ``itertools`` for the adjusted Rand index), independently of the contingency-table
code under test, and compared with it on random small labelings drawn by hypothesis.
"""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from collections.abc import Hashable, Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noveld.eval.metrics import adjusted_rand, clustering_scores, contingency

KEYS = {"nmi", "ari", "homogeneity", "completeness", "v_measure", "purity"}


# ----------------------------------------------------------------------------- slow references


def ref_entropy(labels: Sequence[Hashable]) -> float:
    """H(X) = −Σ_x p(x) log p(x), by explicit sums."""
    n = len(labels)
    return -sum((c / n) * math.log(c / n) for c in Counter(labels).values())


def ref_mutual_info(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    """I(A;B) = Σ_{x,y} p(x,y) log(p(x,y) / (p(x) p(y))), by explicit sums."""
    n = len(a)
    pa = {x: c / n for x, c in Counter(a).items()}
    pb = {y: c / n for y, c in Counter(b).items()}
    total = 0.0
    for (x, y), c in Counter(zip(a, b, strict=True)).items():
        pxy = c / n
        total += pxy * math.log(pxy / (pa[x] * pb[y]))
    return total


def ref_conditional_entropy(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    """H(A|B) = −Σ_{x,y} p(x,y) log p(x|y), by explicit sums."""
    n = len(a)
    nb = Counter(b)
    joint = Counter(zip(a, b, strict=True))
    return -sum((c / n) * math.log(c / nb[y]) for (_, y), c in joint.items())


def ref_ari(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    """ARI from the pair-confusion counts (every pair of items visited with itertools)."""
    both = only_a = only_b = neither = 0
    for i, j in itertools.combinations(range(len(a)), 2):
        same_a, same_b = a[i] == a[j], b[i] == b[j]
        if same_a and same_b:
            both += 1
        elif same_a:
            only_a += 1
        elif same_b:
            only_b += 1
        else:
            neither += 1
    if only_a == 0 and only_b == 0:  # identical partitions of the pairs (incl. n < 2)
        return 1.0
    num = 2.0 * (both * neither - only_a * only_b)
    den = (both + only_a) * (only_a + neither) + (both + only_b) * (only_b + neither)
    return num / den


def ref_scores(true: Sequence[Hashable], pred: Sequence[Hashable]) -> dict[str, float]:
    """All six scores from the definitions, with the usual conventions for degenerate cases."""
    hc, hk = ref_entropy(true), ref_entropy(pred)
    mi = ref_mutual_info(true, pred)
    nmi = 1.0 if hc == 0 and hk == 0 else mi / ((hc + hk) / 2)
    hom = 1.0 if hc == 0 else 1.0 - ref_conditional_entropy(true, pred) / hc
    com = 1.0 if hk == 0 else 1.0 - ref_conditional_entropy(pred, true) / hk
    vm = 0.0 if hom + com == 0 else 2 * hom * com / (hom + com)
    members: dict[Hashable, list[Hashable]] = {}
    for t, p in zip(true, pred, strict=True):
        members.setdefault(p, []).append(t)
    purity = sum(Counter(m).most_common(1)[0][1] for m in members.values()) / len(true)
    return {
        "nmi": nmi,
        "ari": ref_ari(true, pred),
        "homogeneity": hom,
        "completeness": com,
        "v_measure": vm,
        "purity": purity,
    }


# ----------------------------------------------------------------------------- hand-worked


def manning_example() -> tuple[list[str], list[int]]:
    """Manning, Raghavan & Schütze, IR book fig. 16.4: 17 items, 3 classes, 3 clusters."""
    clusters = [("x" * 5 + "o", 0), ("x" + "o" * 4 + "d", 1), ("x" * 2 + "d" * 3, 2)]
    true = [c for s, _ in clusters for c in s]
    pred = [k for s, k in clusters for _ in s]
    return true, pred


def test_manning_book_example() -> None:
    true, pred = manning_example()
    s = clustering_scores(true, pred)
    assert set(s) == KEYS
    assert s["purity"] == pytest.approx(12 / 17)  # (5 + 4 + 3) / 17
    # pairs: Σ C(n_ij,2) = 20, Σ C(a_i,2) = 44 (classes 8/5/4), Σ C(b_j,2) = 40, C(17,2) = 136
    # ARI = (20 − 44·40/136) / ((44+40)/2 − 44·40/136) = 120/494
    assert s["ari"] == pytest.approx(60 / 247)
    assert s["nmi"] == pytest.approx(0.36, abs=0.005)  # the book's NMI is the arithmetic one
    ln = math.log
    h_c = -(8 / 17 * ln(8 / 17) + 5 / 17 * ln(5 / 17) + 4 / 17 * ln(4 / 17))
    h_k = -(2 * 6 / 17 * ln(6 / 17) + 5 / 17 * ln(5 / 17))
    mi = (
        5 / 17 * ln(5 * 17 / (6 * 8))
        + 1 / 17 * ln(17 / (6 * 5))
        + 1 / 17 * ln(17 / (6 * 8))
        + 4 / 17 * ln(4 * 17 / (6 * 5))
        + 1 / 17 * ln(17 / (6 * 4))
        + 2 / 17 * ln(2 * 17 / (5 * 8))
        + 3 / 17 * ln(3 * 17 / (5 * 4))
    )
    assert s["nmi"] == pytest.approx(2 * mi / (h_c + h_k))
    assert s["homogeneity"] == pytest.approx(mi / h_c)
    assert s["completeness"] == pytest.approx(mi / h_k)


def test_half_split_example() -> None:
    # classes {0,0,0 | 1,1,1}; clusters {0,0 | 0,1 | 1,1}
    s = clustering_scores([0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 2, 2])
    ln2, ln3 = math.log(2), math.log(3)
    assert s["homogeneity"] == pytest.approx(2 / 3)  # H(C|K) = ln2/3, H(C) = ln2
    assert s["completeness"] == pytest.approx((2 / 3) * ln2 / ln3)
    assert s["nmi"] == pytest.approx((2 / 3) * ln2 / ((ln2 + ln3) / 2))
    h, c = 2 / 3, (2 / 3) * ln2 / ln3
    assert s["v_measure"] == pytest.approx(2 * h * c / (h + c))
    # Σ C(n_ij,2) = 2, Σ C(a,2) = 6, Σ C(b,2) = 3, C(6,2) = 15 → (2 − 1.2) / (4.5 − 1.2)
    assert s["ari"] == pytest.approx(8 / 33)
    assert s["purity"] == pytest.approx(5 / 6)


def test_crossed_labels_give_negative_ari() -> None:
    s = clustering_scores(["a", "a", "b", "b"], [0, 1, 0, 1])
    assert s["ari"] == pytest.approx(-0.5)  # (0 − 2/3) / (2 − 2/3)
    assert s["nmi"] == pytest.approx(0.0, abs=1e-12)
    assert s["homogeneity"] == pytest.approx(0.0, abs=1e-12)
    assert s["completeness"] == pytest.approx(0.0, abs=1e-12)
    assert s["v_measure"] == pytest.approx(0.0, abs=1e-12)
    assert s["purity"] == pytest.approx(0.5)


def test_accepts_numpy_arrays_and_mixed_label_types() -> None:
    true = np.array(["a", "a", "b", "b"])
    pred = np.array([3, 3, 8, 8])
    assert clustering_scores(true, pred) == {k: pytest.approx(1.0) for k in KEYS}
    assert clustering_scores(list(true), [None, None, "x", "x"])["ari"] == pytest.approx(1.0)
    tuples = [(0, 1), (0, 1), (2, 3), (2, 3)]  # tuple labels are one label each, not 2-D rows
    assert clustering_scores(tuples, [1, 1, 1, 2])["purity"] == pytest.approx(3 / 4)
    assert contingency(tuples, [1, 1, 1, 2]).tolist() == [[2, 0], [1, 1]]
    assert clustering_scores([], [])["purity"] == 0.0


def test_contingency_table() -> None:
    t = contingency(["b", "a", "a", "b", "b"], [1, 1, 2, 2, 2])
    assert t.tolist() == [[1, 1], [1, 2]]  # rows a, b; columns 1, 2
    with pytest.raises(ValueError):
        contingency([1, 2], [1])


def test_adjusted_rand_on_table_matches_labels() -> None:
    true, pred = manning_example()
    table = np.array([[5, 1, 2], [1, 4, 0], [0, 1, 3]])  # rows x, o, d
    assert adjusted_rand(table) == pytest.approx(60 / 247)
    assert adjusted_rand(table) == pytest.approx(clustering_scores(true, pred)["ari"])
    assert adjusted_rand(table.T) == pytest.approx(adjusted_rand(table))


# ----------------------------------------------------------------------------- identities


@pytest.mark.parametrize("true", [[0, 1, 2, 0, 1, 2, 2], ["x"] * 5, list("abcdef"), [7]])
def test_perfect_clustering_scores_one(true: list[object]) -> None:
    pred = [f"cluster-{t!r}" for t in true]  # a bijective renaming
    assert clustering_scores(true, pred) == {k: pytest.approx(1.0) for k in KEYS}


def test_all_in_one_cluster() -> None:
    s = clustering_scores([0, 0, 1, 1, 2, 2], ["one"] * 6)
    assert s["homogeneity"] == 0.0
    assert s["completeness"] == 1.0
    assert s["nmi"] == 0.0
    assert s["v_measure"] == 0.0
    assert s["ari"] == 0.0
    assert s["purity"] == pytest.approx(1 / 3)


def test_all_singletons() -> None:
    s = clustering_scores([0, 0, 1, 1, 2, 2], list(range(6)))
    assert s["homogeneity"] == pytest.approx(1.0)
    assert s["purity"] == 1.0
    assert s["ari"] == 0.0
    assert s["completeness"] == pytest.approx(math.log(3) / math.log(6))


def test_ari_of_independent_labelings_is_near_zero() -> None:
    rng = np.random.default_rng(0)
    aris = []
    for _ in range(20):
        true = rng.integers(0, 10, size=2000).tolist()
        pred = rng.integers(0, 15, size=2000).tolist()
        aris.append(clustering_scores(true, pred)["ari"])
    assert max(abs(a) for a in aris) < 0.01
    assert abs(float(np.mean(aris))) < 0.003


def test_large_counts_do_not_overflow() -> None:
    table = np.array([[400_000, 100_000], [50_000, 450_000]], dtype=np.int64)
    true = [0] * 500_000 + [1] * 500_000
    pred = [0] * 400_000 + [1] * 100_000 + [0] * 50_000 + [1] * 450_000
    s = clustering_scores(true, pred)
    assert s["ari"] == pytest.approx(adjusted_rand(table))
    assert 0.0 < s["ari"] < 1.0
    assert s["purity"] == pytest.approx(0.85)


# ----------------------------------------------------------------------------- hypothesis


labelings = st.integers(min_value=1, max_value=25).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 4), min_size=n, max_size=n),
        st.lists(st.integers(0, 5), min_size=n, max_size=n),
    )
)


@settings(max_examples=300, deadline=None)
@given(labelings)
def test_matches_slow_reference(pair: tuple[list[int], list[int]]) -> None:
    true, pred = pair
    got = clustering_scores(true, pred)
    want = ref_scores(true, pred)
    assert set(got) == KEYS
    for k in KEYS:
        assert got[k] == pytest.approx(want[k], abs=1e-9), k


@settings(max_examples=200, deadline=None)
@given(labelings, st.randoms(use_true_random=False))
def test_invariant_to_renaming_predicted_labels(
    pair: tuple[list[int], list[int]], rnd: random.Random
) -> None:
    true, pred = pair
    names = sorted(set(pred))
    shuffled = list(names)
    rnd.shuffle(shuffled)
    rename = {a: f"c{b}" for a, b in zip(names, shuffled, strict=True)}
    renamed = [rename[p] for p in pred]
    base, other = clustering_scores(true, pred), clustering_scores(true, renamed)
    for k in KEYS:
        assert other[k] == pytest.approx(base[k], abs=1e-12), k


@settings(max_examples=200, deadline=None)
@given(labelings)
def test_symmetries_and_bounds(pair: tuple[list[int], list[int]]) -> None:
    true, pred = pair
    s, r = clustering_scores(true, pred), clustering_scores(pred, true)
    for k in ("nmi", "ari", "v_measure"):
        assert r[k] == pytest.approx(s[k], abs=1e-12), k
    assert r["homogeneity"] == pytest.approx(s["completeness"], abs=1e-12)
    assert r["completeness"] == pytest.approx(s["homogeneity"], abs=1e-12)
    for k in ("nmi", "homogeneity", "completeness", "v_measure", "purity"):
        assert 0.0 <= s[k] <= 1.0, k
    assert -1.0 <= s["ari"] <= 1.0
