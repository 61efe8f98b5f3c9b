"""What a run stopped by a state conflict tells the operator to do."""

from __future__ import annotations

from noveld.daemon.stepping import state_damaged
from noveld.state.redis.reasons import StoreConflict


def test_conflicts_another_writer_causes_do_not_first_advise_a_restore() -> None:
    """Two file runs on one namespace (uid slot 0 shared) or a set-offset under a running input
    stopped the run with "gone or damaged … restore from a backup", which would throw good
    commits away; the likely cause comes first now."""
    for code, facts, cause in (
        ("offset_gap", ["news.jsonl:0", "0", "2624"], "news.jsonl:0 gap: stored 0 < 2624"),
        (
            "uid_slot_shared",
            ["0", "58", "0"],
            "uid slot 0 is at 58, writer assumed 0 (two writers share a slot?)",
        ),
    ):
        said = state_damaged(StoreConflict.from_commit(code, facts))
        assert cause in said
        assert said.index("another noveld process writes this namespace") < said.index("backup")
    lost = state_damaged(StoreConflict.from_commit("log_ahead", ["3", "2"]))
    assert "another noveld process" not in lost and "backup" in lost
