"""Batches of texts stepped through a pipeline as one partition's records of topic ``in``, with
consecutive offsets per partition, as a Kafka source would hand them over."""

from __future__ import annotations

import json

from noveld.connectors.jsonl import Record
from noveld.daemon.pipeline import Pipeline
from noveld.schema import SourcePosition


class PartitionFeed:
    """The next offset of each partition; ``step`` feeds one batch and advances it."""

    def __init__(self) -> None:
        self.at: dict[int, int] = {}

    def step(self, pipe: Pipeline, partition: int, texts: list[str], prefix: str = "f") -> None:
        """One pipeline step of ``texts`` on partition ``partition``: documents with ids
        ``{prefix}{partition}-{offset}`` at consecutive offsets, committed up to the last."""
        first = self.at.get(partition, 0)
        recs = [
            Record(
                json.dumps({"id": f"{prefix}{partition}-{first + i}", "text": t}).encode(),
                SourcePosition(topic="in", partition=partition, offset=first + i),
            )
            for i, t in enumerate(texts)
        ]
        key = f"in:{partition}"
        pipe.step(recs, {key: first}, {key: first + len(recs)})
        self.at[partition] = first + len(recs)
