"""Known labels (semi-supervised seating): labelled documents sit in their category's cluster
and never move; known categories are never retired or merged away; uids are deterministic."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers.dpmm_oracle import random_docs
from hypothesis import given
from hypothesis import strategies as st

from noveld.daemon.pipeline import label_uid
from noveld.models.base import DocBatch
from noveld.models.dpmm import DPMM, DPMMConfig, replay_delta
from noveld.models.hdp import TOPIC_SLOT
from noveld.models.svi import SVI, SVIConfig
from noveld.state.base import FIRST_RESERVED_SLOT, KNOWN_LABEL_SLOT, NamespaceState, state_digest


def test_label_uids_are_deterministic_distinct_and_in_their_slot() -> None:
    a, b = label_uid("sports"), label_uid("politics")
    assert a == label_uid("sports") and a != b
    assert a >> 40 == KNOWN_LABEL_SLOT == b >> 40
    assert KNOWN_LABEL_SLOT >= FIRST_RESERVED_SLOT and TOPIC_SLOT >= FIRST_RESERVED_SLOT


@pytest.mark.parametrize("model", [DPMM(DPMMConfig(rejuvenation_sweeps=2, deterministic=False,
                                                   half_life_docs=20.0, retire_min_mass=0.5)),
                                   SVI(SVIConfig(retire_min_mass=0.5))])  # fmt: skip
def test_labelled_documents_stay_in_their_category(model: DPMM) -> None:
    rng = np.random.default_rng(0)
    stats, replica = model.new_state(), model.new_state()
    sports, politics = label_uid("sports"), label_uid("politics")
    pinned = frozenset({sports, politics})
    for step in range(12):
        docs = random_docs(rng, 20, 40)
        known = np.full(20, -1, dtype=np.int64)
        known[:3] = sports if step < 2 else -1  # politics is only ever seen in the first batch
        known[3] = politics if step == 0 else -1
        res = model.partial_fit(DocBatch.from_docs(docs, 40), stats, rng, known, pinned)
        assert all(int(u) == int(k) for u, k in zip(res.assignments, known, strict=True) if k >= 0)
        assert sports not in {b[0] for b in res.born} and politics not in {b[0] for b in res.born}
        replay_delta(replica, res.delta, getattr(model.config, "half_life_docs", 0.0))
    live = set(stats.uid[stats.active_slots()].tolist())
    assert {sports, politics} <= live  # faded below retire_min_mass, yet pinned: still there
    if isinstance(model, SVI):
        assert state_digest(NamespaceState({}, replica)) == state_digest(NamespaceState({}, stats))


def test_without_labels_nothing_is_forced() -> None:
    model = DPMM(DPMMConfig())
    rng = np.random.default_rng(1)
    stats = model.new_state()
    res = model.partial_fit(DocBatch.from_docs(random_docs(rng, 10, 20), 20), stats, rng)
    assert all(int(u) >> 40 != KNOWN_LABEL_SLOT for u in res.assignments)


def story_docs(
    rng: np.random.Generator, words: list[int], n: int, length: int = 6
) -> list[list[int]]:
    return [list(rng.choice(words, size=length)) for _ in range(n)]


@pytest.mark.parametrize("kind", ["dpmm", "svi"])
@pytest.mark.parametrize("margin", [20.0, 1e9])
def test_an_unlabelled_twin_is_absorbed_into_its_known_category(kind: str, margin: float) -> None:
    """Story A's first documents arrive unlabelled and open a novel cluster; later its labelled
    documents fill the known category. The twin then merges into the known category (a
    `merged` entry, the counts moved, later documents of A land there); story B's cluster, with
    other words, is never absorbed. With an enormous margin nothing is absorbed."""
    rng = np.random.default_rng(3)
    cfg = {"alpha": 0.3, "alpha_scaling": "none", "split": False, "absorb_margin": margin}
    model = DPMM(DPMMConfig(**cfg)) if kind == "dpmm" else SVI(SVIConfig(**cfg))  # type: ignore[arg-type]
    stats, replica = model.new_state(), model.new_state()
    a_words, b_words = list(range(0, 12)), list(range(30, 42))
    known_a = label_uid("a")
    pinned = frozenset({known_a})
    first = model.partial_fit(
        DocBatch.from_docs(story_docs(rng, a_words, 8) + story_docs(rng, b_words, 8), 60),
        stats, rng, None, pinned,
    )  # fmt: skip
    replay_delta(replica, first.delta, 0.0)
    twin, b_cluster = int(first.assignments[0]), int(first.assignments[8])
    assert twin != b_cluster and twin >> 40 != KNOWN_LABEL_SLOT
    docs = story_docs(rng, a_words, 10)
    known = np.full(10, -1, dtype=np.int64)
    known[:6] = known_a
    second = model.partial_fit(DocBatch.from_docs(docs, 60), stats, rng, known, pinned)
    replay_delta(replica, second.delta, 0.0)
    merged = {(s, d) for s, d, _ in second.merged}
    live = set(stats.uid[stats.active_slots()].tolist())
    assert b_cluster in live and all(s != b_cluster for s, _ in merged)
    if margin < 1e6:
        assert (twin, known_a) in merged and twin not in live
        assert set(second.assignments.tolist()) == {known_a}  # the unlabelled ones too
        if kind == "dpmm":  # the twin's 8 documents moved in with the batch's 10
            k = int(np.flatnonzero(stats.uid[: stats.kmax] == known_a)[0])
            assert float(stats.mass(np.array([k]))[0]) == pytest.approx(18.0)
    else:
        assert not merged and twin in live
    # the writer equals a replay of its deltas, merges included
    assert state_digest(NamespaceState({}, replica)) == state_digest(NamespaceState({}, stats))


@given(
    st.integers(0, 200), st.integers(0, 200), st.lists(st.integers(0, 60), min_size=1, max_size=8)
)
def test_hidden_label_gains_are_the_beta_bernoulli_chain_rule(
    labelled: int, hidden: int, sizes: list[int]
) -> None:
    """log B(1 + L, 1 + U + n) − log B(1 + L, 1 + U) is the product of n predictive
    probabilities that one more document of a known category comes unlabelled: 0 for an empty
    cluster, never positive, lower for a larger cluster."""
    from noveld.models.hybrid_known import hidden_label_gains

    mass = np.array(sizes, dtype=np.float64)
    got = hidden_label_gains(mass, float(labelled), float(hidden))
    a, b = 1.0 + labelled, 1.0 + hidden
    want = [sum(math.log((b + j) / (a + b + j)) for j in range(n)) for n in sizes]
    np.testing.assert_allclose(got, want, atol=1e-9)
    assert np.all(got <= 1e-12)
    order = np.argsort(mass, kind="stable")
    assert np.all(np.diff(got[order]) <= 1e-12)
