"""A batch cut short between its model step and its commit (an unexpected error) must not reach
the snapshot: the model would then hold documents whose offsets were never recorded, and the
next run would count them again."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from noveld.daemon.embedded import run_file
from noveld.daemon.settings import load_settings
from noveld.daemon.sinks import CollectingEvents
from noveld.schema import DecodedDocument, SourcePosition
from noveld.state.memory import read_snapshot


class Boom(RuntimeError):
    """The unexpected error."""


def failing_on_batch(n: int) -> object:
    """A batch observer (called after the model step, before the commit) raising on batch n."""
    seen = {"batches": 0}

    def observer(
        docs: list[DecodedDocument], positions: list[SourcePosition], assignments: np.ndarray
    ) -> None:
        seen["batches"] += 1
        if seen["batches"] == n:
            raise Boom("after the model step, before the commit")

    return observer


def test_an_error_mid_batch_leaves_the_last_commit_on_disk_and_resume_counts_once(
    tmp_path: Path,
) -> None:
    path = tmp_path / "in.jsonl"
    words = ["alpha beta", "gamma delta", "epsilon zeta"]
    path.write_text(
        "".join(json.dumps({"id": str(i), "text": words[i % 3]}) + "\n" for i in range(50))
    )
    settings = load_settings(
        None,
        {
            "state": {"dir": str(tmp_path / "st"), "snapshot_interval_s": 0},
            "batch": {"max_docs": 10},
        },
    )
    with pytest.raises(Boom):
        run_file(settings, str(path), events_sink=CollectingEvents(), observer=failing_on_batch(3))
    state, _ = read_snapshot(tmp_path / "st" / "state.npz")
    assert state.offsets == {f"{path}:0": 20}  # two batches committed
    assert state.counters["docs"] == 20
    stats = state.stats
    assert stats.m[stats.alive].sum() == pytest.approx(20.0)  # not 30: batch 3 is not in it

    code, _, pipeline = run_file(settings, str(path), events_sink=CollectingEvents())
    assert code == 0
    st = pipeline.state
    assert st.counters["docs"] == 50
    assert st.stats.m[st.stats.alive].sum() == pytest.approx(50.0)  # each document once
