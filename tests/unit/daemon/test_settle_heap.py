"""After its first batch a run puts the objects it started with out of the cyclic collector's
reach (a full collection over them took ~250 ms, the commit latency's tail)."""

from __future__ import annotations

import gc
import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from noveld.daemon.embedded import run_file
from noveld.daemon.settings import load_settings


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_a_run_freezes_its_start_up_heap_after_the_first_batch(
    unfrozen: None, tmp_path: Path
) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(f'{{"id": "d{i}", "text": "alpha beta {i % 3}"}}\n' for i in range(5)))
    settings = load_settings(None, {"dlq": str(tmp_path / "dlq.jsonl")})
    assert gc.get_freeze_count() == 0
    code, progress, _ = run_file(settings, str(src), io.StringIO(), None, snapshot=False)
    assert code == 0 and progress.docs == 5
    frozen = gc.get_freeze_count()
    assert frozen > 1000  # the imports' and the model's objects at least
    run_file(settings, str(src), io.StringIO(), None, snapshot=False)
    assert gc.get_freeze_count() <= frozen  # once per process (frozen objects may be freed)
