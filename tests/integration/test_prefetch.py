"""A file run that reads, decodes and encodes the next batch on a second thread while the
model steps this one (``batch.prefetch``) ends with the same state and events as one that does
them in turn, and resumes a file that grew as one that did not read ahead."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from cli_runner import noveld

import noveld.daemon.pipeline as pipeline_mod
from noveld.daemon.embedded import run_file
from noveld.daemon.settings import load_settings
from noveld.daemon.stages.prefetch import Prefetcher
from noveld.state.base import state_digest

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stream(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("prefetch") / "gen.jsonl"
    out = noveld(
        "generate", "--docs", "1200", "--stories", "20", "--stream-seed", "5", "--out", str(path)
    )
    assert out.returncode == 0, out.stderr
    return path


def _run(
    stream: Path, state_dir: Path, prefetch: bool, max_doc_tokens: int = 16384
) -> tuple[str, str]:
    """(state digest, events) of a sampled hybrid run over ``stream``."""
    settings = load_settings(
        None,
        {
            "state": {"dir": str(state_dir)},
            "dlq": str(state_dir.parent / f"{state_dir.name}-dlq.jsonl"),
            "batch": {"max_docs": 100, "prefetch": prefetch},
            "limits": {"max_doc_tokens": max_doc_tokens},
            "model": {
                "likelihood": "hybrid", "featurizer": "hybrid", "deterministic": False,
                "seed": 11, "half_life_docs": 400.0,
            },
        },
    )  # fmt: skip
    events = io.StringIO()
    code, _, pipeline = run_file(settings, str(stream), events_out=events)
    assert code == 0
    return state_digest(pipeline.state), events.getvalue()


def test_prefetch_gives_the_same_state_and_events(
    stream: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefetched: list[int] = []
    submit = Prefetcher.submit

    def counted(self: Prefetcher, records: Any) -> Any:
        prefetched.append(len(records))
        return submit(self, records)

    monkeypatch.setattr(Prefetcher, "submit", counted)
    ahead = _run(stream, tmp_path / "ahead", True)
    assert prefetched == [100] * 12  # every batch was read and prepared ahead
    in_turn = _run(stream, tmp_path / "in-turn", False)
    assert len(prefetched) == 12
    assert ahead == in_turn and '"cluster.born"' in ahead[1]


def test_prefetch_gives_the_same_state_and_events_with_documents_cut(
    stream: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Documents past ``limits.max_doc_tokens`` are cut after their views were read ahead:
    the cut ones are read again, the others keep theirs, and the run is the same."""
    cut: list[int] = []
    limit_length = pipeline_mod.limit_length

    def counted(*args: Any) -> Any:
        docs, kept, read = limit_length(*args)
        cut.append(args[-1].truncated)
        return docs, kept, read

    monkeypatch.setattr(pipeline_mod, "limit_length", counted)
    ahead = _run(stream, tmp_path / "ahead", True, max_doc_tokens=12)
    assert sum(cut) > 50  # documents were cut
    in_turn = _run(stream, tmp_path / "in-turn", False, max_doc_tokens=12)
    assert ahead == in_turn


def test_a_run_read_ahead_resumes_where_it_committed(stream: Path, tmp_path: Path) -> None:
    """The input's checksum each commit keeps is the one of its own lines, not of the lines
    read ahead: a second run over the grown file resumes (a wrong checksum refuses it)."""
    lines = stream.read_text().splitlines(keepends=True)
    grown = tmp_path / "in.jsonl"
    grown.write_text("".join(lines[:600]))
    _run(grown, tmp_path / "resumed", True)
    grown.write_text("".join(lines))
    resumed, _ = _run(grown, tmp_path / "resumed", True)
    whole, _ = _run(grown, tmp_path / "whole", False)
    assert resumed == whole
