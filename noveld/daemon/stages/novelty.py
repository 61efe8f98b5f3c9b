"""Novelty stage: feeds a model step's births, assignments and ends to the novelty tracker,
which confirms the clusters that grew enough, soon enough, to announce."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from noveld.daemon.model_registry import ModelVariant
from noveld.daemon.stages.events import position_json
from noveld.daemon.stages.live import LiveNamespace
from noveld.models.base import BatchResult, ClusterModel, DocBatch
from noveld.models.kernels import multinomial as kern
from noveld.models.lineage import UID_SLOT_BITS, Lineage
from noveld.models.novelty import Confirmation
from noveld.models.suffstats import MultinomialStats
from noveld.schema import DecodedDocument, SourcePosition


class _PositionDicts(Sequence[dict[str, Any]]):
    """Positions as JSON dicts, converted only for the few the novelty tracker keeps; a
    document's own ``ts`` (event time) fills in the position's time when the source has none."""

    def __init__(
        self, positions: Sequence[SourcePosition], docs: Sequence[DecodedDocument]
    ) -> None:
        self._positions = positions
        self._docs = docs

    def __len__(self) -> int:
        return len(self._positions)

    def __getitem__(self, i: int) -> dict[str, Any]:  # type: ignore[override]
        return position_json(self._positions[i], self._docs[i])


class _BatchFeatures(Sequence[tuple[np.ndarray, np.ndarray]]):
    """(word ids, counts) of each document of a batch, sliced only when asked for."""

    def __init__(self, batch: DocBatch) -> None:
        self._batch = batch

    def __len__(self) -> int:
        return len(self._batch)

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:  # type: ignore[override]
        return self._batch.doc(i)


def others_writing(lineage: Lineage) -> bool:
    """Has another writer opened clusters lately (a young cluster of a uid slot this writer
    does not hold)? Only then may a birth here have a twin, and is worth holding."""
    own = lineage.own_slots
    return own is not None and any(u >> UID_SLOT_BITS not in own for u in lineage.young)


def namespace_count(stats: object, fallback: int) -> int:
    """Documents the namespace has counted so far, every writer's that was applied here: the
    novelty tracker's clock, so that a candidate's window spans the same stream at one replica
    as at four. ``fallback`` (this writer's own committed count) for statistics without one."""
    ictl = getattr(stats, "ictl", None)
    return fallback if ictl is None else int(ictl[kern.DOCS_SEEN])


def held_documents(stats: MultinomialStats, uids: Iterable[int]) -> dict[int, int]:
    """Documents each live cluster of ``uids`` holds (its mass, rounded): what a candidate
    counts at least once its twin on another replica was merged into it."""
    live = {u: k for u in uids if (k := stats.slot_of(u)) >= 0}
    masses = stats.mass(np.fromiter(live.values(), dtype=np.int64, count=len(live)))
    return {u: round(float(n)) for u, n in zip(live, masses, strict=True)}


def moved_to_others(result: BatchResult, lineage: Lineage | None) -> dict[int, int]:
    """The step's merges into another writer's cluster (reconciliation), source uid →
    survivor uid: a candidate merged so lives on as the survivor."""
    own = None if lineage is None else lineage.own_slots
    if own is None:
        return {}
    return {u: s for u, s, _ in result.merged if s >> UID_SLOT_BITS not in own}


def observe(
    live: LiveNamespace,
    variant: ModelVariant,
    model: ClusterModel,
    batch: DocBatch,
    result: BatchResult,
    docs: Sequence[DecodedDocument],
    positions: Sequence[SourcePosition],
    first_index: int,
    refound: bool,
) -> list[Confirmation]:
    """Track the step's births and their members; returns the births confirmed novel now (held
    ones under the cluster they live on in: :class:`~noveld.models.novelty.NoveltyTracker`).
    ``first_index`` is the namespace's document count before the batch."""
    members = variant.member_features
    stats = live.state.stats
    lineage = getattr(stats, "lineage", None)

    def resolve(uid: int) -> int | None:
        """The live cluster ``uid`` lives on in (after merges), None when it is gone."""
        survivor = uid if lineage is None else lineage.resolve(uid)
        return survivor if stats.slot_of(survivor) >= 0 else None

    others = lineage is not None and others_writing(lineage)
    moved = moved_to_others(result, lineage)
    held = None
    if others:
        held = held_documents(stats, [*live.tracker.candidates, *moved.values()])
    confirmed = live.tracker.observe(
        result.born,
        result.assignments.tolist(),
        [d.id for d in docs],
        _PositionDicts(positions, docs),
        first_index,
        [u for u, _, _ in result.retired] + [u for u, _, _ in result.merged],
        _BatchFeatures(batch) if members is None else members(model, batch),
        model.refound_test(live.state.stats, batch) if refound else None,
        resolve,
        namespace_count(stats, first_index + len(docs)),
        others,
        moved,
        held,
    )
    # a held birth released under a survivor this writer announced already says nothing new
    return [c for c in confirmed if c.candidate.uid not in live.announced]
