"""Known labels (semi-supervised seating): labelled documents sit in their category's cluster
and never move; known categories are never retired or merged away; uids are deterministic."""

from __future__ import annotations

import numpy as np
import pytest
from test_dpmm_kernels import random_docs

from noveld.daemon.pipeline import KNOWN_LABEL_SLOT, label_uid
from noveld.models.base import DocBatch
from noveld.models.dpmm import DPMM, DPMMConfig, replay_delta
from noveld.models.svi import SVI, SVIConfig
from noveld.state.base import NamespaceState, state_digest


def test_label_uids_are_deterministic_distinct_and_in_their_slot() -> None:
    a, b = label_uid("sports"), label_uid("politics")
    assert a == label_uid("sports") and a != b
    assert a >> 40 == KNOWN_LABEL_SLOT == b >> 40


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
