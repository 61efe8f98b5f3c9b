"""The StateStore contract, the same behaviours against both stores: MemoryStore (its snapshot in
a directory) and RedisStore (a real Redis-protocol server from the harness). Each test opens a
"fresh process" with ``open_store()`` to check what survives."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis

from noveld.models.base import DocBatch
from noveld.models.dpmm import DPMM, DPMMConfig
from noveld.state.base import (
    CommitOutcome,
    CommitRequest,
    FingerprintMismatch,
    NamespaceState,
    StateStore,
    state_digest,
)
from noveld.state.memory import MemoryStore, OffsetGap
from noveld.state.redis.reasons import StoreConflict
from noveld.state.redis.store import RedisStore

pytestmark = pytest.mark.integration

FP: dict[str, Any] = {"kind": "dpmm", "alpha": 0.5, "beta": 0.1, "half_life_docs": 0.0}
KEY = "in:0"
WORDS = [f"w{i}" for i in range(40)]

OpenStore = Callable[[], StateStore]


@pytest.fixture(params=["memory", "redis"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> OpenStore:
    """A fresh view of one namespace per call: what another process would see."""
    if request.param == "memory":
        return lambda: MemoryStore(tmp_path / "state")
    client = redis.Redis.from_url(request.getfixturevalue("redis_url"))
    return lambda: RedisStore(client, "contract")


def new_state(store: StateStore) -> NamespaceState:
    """The namespace's state, started (and its vocabulary interned) if it is new."""
    state = store.load(FP) or NamespaceState(FP, DPMM(DPMMConfig(alpha=0.5, beta=0.1)).new_state())
    if not state.vocab:
        assert store.intern(state, 0, list(WORDS)) == WORDS
    return state


def fitted_request(
    store: StateStore, state: NamespaceState, first: int, n_docs: int, seed: int = 0
) -> CommitRequest:
    """Seat ``n_docs`` documents into ``state`` as the pipeline does, and the batch's commit."""
    store.before_batch(state, {KEY: first})
    rng = np.random.default_rng(seed)
    docs = [list(rng.integers(0, len(WORDS), size=6)) for _ in range(n_docs)]
    result = DPMM(DPMMConfig(alpha=0.5, beta=0.1)).partial_fit(
        DocBatch.from_docs(docs, len(WORDS)), state.stats, rng
    )
    return CommitRequest(
        {KEY: first}, {KEY: first + n_docs}, result.delta, [], {"docs": n_docs}, novelty={}
    )


def empty_request(first: int, nxt: int, events: list[dict[str, Any]]) -> CommitRequest:
    """A commit without statistics (no document seated), carrying ``events``."""
    return CommitRequest({KEY: first}, {KEY: nxt}, None, events, {"docs": nxt - first}, novelty={})


def test_a_new_namespace_loads_as_none(open_store: OpenStore) -> None:
    assert open_store().load(FP) is None
    assert open_store().outbox_pending() == []


def test_a_commit_survives_into_a_fresh_load(open_store: OpenStore) -> None:
    store = open_store()
    state = new_state(store)
    result = store.commit(state, fitted_request(store, state, 0, 30))
    assert result.outcome is CommitOutcome.COMMITTED
    assert result.suppressed == () and not result.vocabulary_moved and result.lease_refusal == ""
    assert state.offsets == {KEY: 30} and state.counters["docs"] == 30
    store.flush(state)

    loaded = open_store().load(FP)
    assert loaded is not None
    assert loaded.offsets == {KEY: 30}
    assert loaded.counters["docs"] == 30
    assert loaded.vocab == WORDS
    assert int(loaded.stats.m[loaded.stats.active_slots()].sum() * loaded.stats.scale) == 30
    assert state_digest(loaded) == state_digest(state)


def test_counters_add_up_over_commits(open_store: OpenStore) -> None:
    store = open_store()
    state = new_state(store)
    first = store.commit(state, fitted_request(store, state, 0, 10))
    second = store.commit(state, fitted_request(store, state, 10, 5, seed=1))
    assert first.outcome is second.outcome is CommitOutcome.COMMITTED
    assert state.counters["docs"] == 15 and state.offsets == {KEY: 15}
    store.flush(state)
    loaded = open_store().load(FP)
    assert loaded is not None
    assert loaded.counters["docs"] == 15 and loaded.offsets == {KEY: 15}
    assert state_digest(loaded) == state_digest(state)


def test_offsets_already_committed_are_a_replay_that_changes_nothing(
    open_store: OpenStore,
) -> None:
    store = open_store()
    state = new_state(store)
    store.commit(state, empty_request(0, 20, [{"event_id": "e1", "type": "note"}]))
    store.flush(state)
    before = (dict(state.offsets), dict(state.counters))

    again = store.commit(state, empty_request(0, 20, [{"event_id": "e2", "type": "note"}]))
    assert again.outcome is CommitOutcome.REPLAY
    assert again.suppressed == ()
    partly = store.commit(state, empty_request(10, 20, []))
    assert partly.outcome is CommitOutcome.REPLAY
    assert (state.offsets, state.counters) == before
    store.flush(state)
    loaded = open_store().load(FP)
    assert loaded is not None and (loaded.offsets, loaded.counters) == before
    assert [e["event_id"] for e in store.outbox_pending()] == ["e1"]  # e2 never went in


def test_a_gap_in_the_offsets_is_refused(open_store: OpenStore) -> None:
    store = open_store()
    state = new_state(store)
    store.commit(state, empty_request(0, 10, []))
    with pytest.raises((OffsetGap, StoreConflict)):
        store.commit(state, empty_request(20, 30, []))
    assert state.offsets == {KEY: 10} and state.counters["docs"] == 10


def test_another_fingerprint_is_refused(open_store: OpenStore) -> None:
    store = open_store()
    state = new_state(store)
    store.commit(state, empty_request(0, 5, []))
    store.flush(state)
    with pytest.raises(FingerprintMismatch, match="alpha"):
        open_store().load({**FP, "alpha": 0.9})
    assert open_store().load(FP) is not None  # the stored namespace is untouched


def test_an_end_nobody_announced_is_suppressed_and_the_rest_delivered(
    open_store: OpenStore,
) -> None:
    """An end offered ``if_announced`` for a cluster no writer announced is left out of the
    outbox and reported in the commit's result; the other events wait until acknowledged."""
    store = open_store()
    state = new_state(store)
    events: list[dict[str, Any]] = [
        {"event_id": "b1", "type": "cluster.born", "cluster_id": "c1"},
        {"event_id": "r9", "type": "cluster.retired", "cluster_id": "c9"},
        {"event_id": "d1", "type": "document.assigned", "cluster_id": "c1"},
    ]
    request = CommitRequest(
        {KEY: 0}, {KEY: 3}, None, events, {"births": 1}, novelty={},
        if_announced=frozenset({"r9"}),
    )  # fmt: skip
    result = store.commit(state, request)
    assert result.outcome is CommitOutcome.COMMITTED
    assert result.suppressed == ("r9",)
    assert [e["event_id"] for e in store.outbox_pending()] == ["b1", "d1"]
    store.ack(["b1", "d1"])  # (Redis drops a commit's outbox entry once all of it is acked)
    assert store.outbox_pending() == []
    assert state.counters["births"] == 1
