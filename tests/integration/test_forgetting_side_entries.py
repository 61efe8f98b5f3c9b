"""Forgetting prunes faded counts, and takes them off the cluster's token mass. Entries a model
keeps beside its tokens — hdp's context values and fields, vmf's embedding dimensions — were
never in that mass: pruning them must leave it alone, or a long-lived cluster's mass goes
negative and the state the run wrote is refused as damaged by the next command."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cli_runner import noveld
from helpers.cli_runs import state_show

from noveld.models.vocabulary import uncounted_ids
from noveld.state.memory import read_snapshot

pytestmark = pytest.mark.integration


def generated(path: Path, *args: str) -> list[dict[str, object]]:
    out = noveld("generate", "--stream-seed", "5", "--out", str(path), *args)
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in path.read_text().splitlines()]


def write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def run_twice_then_show(tmp_path: Path, rows: list[dict[str, object]], *flags: str) -> dict:
    """Two runs on one state dir (the second resumes the first's snapshot), then ``state show``."""
    cut = len(rows) * 3 // 5
    st = tmp_path / "state"
    for name, part in (("a.jsonl", rows[:cut]), ("b.jsonl", rows[cut:])):
        out = noveld("run", "-q", "--input", str(write(tmp_path / name, part)),
                     "--state-dir", str(st), *flags)  # fmt: skip
        assert out.returncode == 0, out.stderr
    info = state_show(st)
    assert info["docs"] == len(rows)
    assert_token_masses_are_their_tokens(st / "state.npz")
    return info


def assert_token_masses_are_their_tokens(snapshot: Path) -> None:
    """Every live cluster's token mass is the sum of its token entries (n_k = Σ_w n_kw), the
    context and dimension entries left out."""
    state, _ = read_snapshot(snapshot)
    stats = state.stats
    side = np.zeros(len(state.vocab), dtype=bool)
    side[uncounted_ids(state.vocab)] = True
    for k in stats.active_slots().tolist():
        words, counts = stats.word_counts(k)
        tokens = float(counts[~side[words]].sum())
        assert stats.ntok[k] * stats.scale == pytest.approx(tokens, rel=1e-9, abs=1e-9)


def test_vmf_embedding_only_documents_under_forgetting(tmp_path: Path) -> None:
    rows = generated(tmp_path / "g.jsonl", "--docs", "1000", "--embeddings", "16")
    for r in rows:
        r.pop("text")  # no words: the dimensions are all the cluster holds
    info = run_twice_then_show(
        tmp_path, rows, "--likelihood", "vmf", "--embedding-dim", "16", "--vmf-cosine", "0.8",
        "--half-life", "200",
    )  # fmt: skip
    assert info["tokens"] == 0.0


def test_hdp_known_categories_with_context_under_forgetting(tmp_path: Path) -> None:
    rows = generated(tmp_path / "g.jsonl", "--docs", "1500", "--sources", "5")
    for i, r in enumerate(rows):
        if i % 3:
            r.pop("label")  # a third labelled: known categories, never retired
    info = run_twice_then_show(tmp_path, rows, "--model", "hdp", "--use-labels",
                               "--half-life", "100")  # fmt: skip
    assert info["tokens"] > 0.0
