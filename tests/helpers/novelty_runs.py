"""Feeding a novelty tracker one batch of documents with made-up ids and positions, as the
pipeline's novelty stage does."""

from __future__ import annotations

from typing import Any

from noveld.models.novelty import NoveltyTracker


def pos(i: int) -> dict[str, Any]:
    """The source position of document ``i`` (topic t, partition 0, offset i)."""
    return {"topic": "t", "partition": 0, "offset": i, "ts": None}


def observe(
    tr: NoveltyTracker,
    births: list[tuple[int, int, float]],
    assign: list[int],
    first: int,
    retired: tuple[int, ...] = (),
    moved: dict[int, int] | None = None,
    held: dict[int, int] | None = None,
) -> list[Any]:
    """``tr.observe`` of a batch whose documents are d{first}, d{first + 1}, …, at offsets
    first, first + 1, …; returns the confirmations."""
    ids = [f"d{first + i}" for i in range(len(assign))]
    at = [pos(first + i) for i in range(len(assign))]
    return tr.observe(births, assign, ids, at, first, retired, moved=moved, held=held)
