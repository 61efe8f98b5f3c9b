"""MemoryStore: offsets checks, atomic snapshots, fingerprint refusal, outbox."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from noveld.models.base import DocBatch
from noveld.models.dpmm import DPMM, DPMMConfig
from noveld.state.base import (
    CommitOutcome,
    CommitRequest,
    FingerprintMismatch,
    NamespaceState,
    state_digest,
)
from noveld.state.memory import MemoryStore, OffsetGap, read_snapshot, write_snapshot

FP = {"kind": "dpmm", "alpha": 0.1}


def fitted_state() -> NamespaceState:
    model = DPMM(DPMMConfig(alpha=0.5, beta=0.1))
    stats = model.new_state()
    rng = np.random.default_rng(0)
    docs = [list(rng.integers(0, 50, size=5)) for _ in range(80)]
    model.partial_fit(DocBatch.from_docs(docs, 50), stats, rng)
    return NamespaceState(
        FP, stats, vocab=[f"w{i}" for i in range(50)], novelty={"candidates": [], "dropped": 2}
    )


def request(first: int, nxt: int, events: list[dict[str, object]] | None = None) -> CommitRequest:
    return CommitRequest({"f:0": first}, {"f:0": nxt}, None, events or [], {"docs": nxt - first})


def test_commit_advances_offsets_and_detects_replay_and_gaps(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    state = fitted_state()
    assert store.commit(state, request(0, 10)).outcome is CommitOutcome.COMMITTED
    assert state.offsets == {"f:0": 10} and state.counters["docs"] == 10
    assert store.commit(state, request(0, 10)).outcome is CommitOutcome.REPLAY
    assert state.counters["docs"] == 10  # a replay changes nothing
    with pytest.raises(OffsetGap):
        store.commit(state, request(20, 30))


def test_an_end_offered_for_a_cluster_the_writer_did_not_announce_is_left_out(
    tmp_path: Path,
) -> None:
    """One writer announces every cluster itself: an end it offers ``if_announced`` (for a
    cluster it did not announce) was never announced, so it is reported, not kept."""
    store = MemoryStore(tmp_path)
    events: list[dict[str, object]] = [
        {"event_id": "r1", "type": "cluster.retired", "cluster_id": "c1"},
        {"event_id": "r2", "type": "cluster.retired", "cluster_id": "c2"},
    ]
    req = CommitRequest({"f:0": 0}, {"f:0": 1}, None, events, {}, if_announced=frozenset({"r2"}))
    result = store.commit(fitted_state(), req)
    assert result.outcome is CommitOutcome.COMMITTED
    assert list(result.suppressed) == ["r2"]
    assert [e["event_id"] for e in store.outbox_pending()] == ["r1"]


def test_snapshot_round_trip_preserves_the_model(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    state = fitted_state()
    store.commit(state, request(0, 80, [{"event_id": "e1", "type": "cluster.born"}]))
    store.flush(state)
    loaded = MemoryStore(tmp_path).load(FP)
    assert loaded is not None
    assert state_digest(loaded) == state_digest(state)
    assert loaded.offsets == {"f:0": 80} and loaded.vocab == state.vocab
    assert loaded.novelty == state.novelty
    again = MemoryStore(tmp_path)
    again.load(FP)
    assert [e["event_id"] for e in again.outbox_pending()] == ["e1"]  # undelivered survive
    again.ack(["e1"])
    assert again.outbox_pending() == []


def test_incompatible_fingerprint_is_refused_with_the_difference(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    state = fitted_state()
    store.flush(state)
    with pytest.raises(FingerprintMismatch, match="alpha"):
        MemoryStore(tmp_path).load({"kind": "dpmm", "alpha": 0.2})


def test_interrupted_snapshot_leaves_the_previous_one_intact(tmp_path: Path) -> None:
    state = fitted_state()
    path = tmp_path / "state.npz"
    write_snapshot(path, state, [])
    before = path.read_bytes()
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(before[: len(before) // 2])  # a crash mid-write leaves a torn temp file
    loaded, _ = read_snapshot(path)
    assert state_digest(loaded) == state_digest(state)
    assert path.read_bytes() == before


def test_a_full_disk_names_the_snapshot_and_keeps_the_last_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full state dir said only "[Errno 28] No space left on device"."""
    state = fitted_state()
    path = tmp_path / "state.npz"
    write_snapshot(path, state, [])
    before = path.read_bytes()

    def full(*_args: object, **_kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", full)
    with pytest.raises(OSError, match=r"cannot write the state snapshot .*state\.npz\.tmp: No sp"):
        write_snapshot(path, state, [])
    assert path.read_bytes() == before
    assert not path.with_name("state.npz.tmp").exists()


def test_unreadable_snapshot_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "state.npz"
    path.write_bytes(b"not a snapshot")
    with pytest.raises(ValueError, match="cannot read snapshot"):
        read_snapshot(path)


def test_flush_due_follows_the_interval(tmp_path: Path) -> None:
    now = [0.0]
    store = MemoryStore(tmp_path, snapshot_interval_s=5.0, clock=lambda: now[0])
    assert not store.flush_due()
    now[0] = 5.0
    assert store.flush_due()
    store.flush(fitted_state())
    assert not store.flush_due()
    assert not MemoryStore(None).flush_due()
    assert os.path.exists(tmp_path / "state.npz")


def test_state_show_counts_the_candidates_dropped_without_an_event() -> None:
    """docs/events.md says candidates that never confirm are counted: state show says how many."""
    from noveld.daemon.cli_state import summarize

    info = summarize(fitted_state(), 0)
    assert info["novelty_dropped"] == 2 and info["novelty_candidates"] == 0


def test_a_fingerprint_mismatch_of_the_model_names_the_model_first() -> None:
    """Resuming an svi state with --model hdp listed ten settings, the model among them."""
    from noveld.state.memory import describe_mismatch

    svi = {"kind": "svi", "alpha": 1.0, "kappa": 0.8, "tau0": 1.0}
    hdp = {"kind": "hdp", "alpha": 1.0, "topics": 2000}
    assert describe_mismatch(svi, hdp) == (
        "kind: stored='svi' configured='hdp' (and 3 settings that come with it)"
    )
    assert describe_mismatch(svi, {**svi, "alpha": 2.0, "kappa": 0.7}) == (
        "alpha: stored=1.0 configured=2.0; kappa: stored=0.8 configured=0.7"
    )


def test_a_words_namespace_under_the_hybrid_default_is_told_how_to_resume() -> None:
    from noveld.state.memory import describe_mismatch

    words = {"kind": "dpmm", "likelihood": "multinomial"}
    hybrid = {**words, "likelihood": "hybrid", "featurizer": "hybrid"}
    said = describe_mismatch(words, hybrid)
    assert said.startswith("likelihood: stored='multinomial' configured='hybrid'")
    assert said.endswith("resumes with --featurizer words")
    assert "--featurizer" not in describe_mismatch(words, {**words, "likelihood": "edcm"})
