"""Decode stage: raw records to documents, in order, until the invalid-record breaker trips;
rejected records are held and dead-lettered with the batch, in input order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from noveld.connectors.decode import DecodeLimits, FieldNames, Invalid, decode_record
from noveld.connectors.jsonl import Record
from noveld.daemon.stages.labels import label_collision
from noveld.daemon.stages.report import BatchReport
from noveld.schema import DecodedDocument, InvalidReason
from noveld.state.base import partition_key


class DeadLetterSink(Protocol):
    """Where invalid records go (a file, a Kafka topic)."""

    def send(self, record: Record, reason: InvalidReason, detail: str) -> None:
        """Dead-letter one record with its reason."""

    def flush(self) -> None:
        """Make dead letters durable (called before the offsets covering them are committed)."""


class Rejections:
    """The batch's rejected records (record, reason, detail) and the run of invalid records
    in a row across batches (what the breaker counts)."""

    def __init__(self) -> None:
        self.consecutive = 0
        self._dead: list[tuple[Record, InvalidReason, str]] = []

    def begin(self) -> None:
        """Start a batch with no rejected records."""
        self._dead = []

    def reject(self, rec: Record, reason: InvalidReason, detail: str, rep: BatchReport) -> None:
        """Count a rejected record; it is sent with the batch's others before the commit."""
        self._dead.append((rec, reason, detail))
        rep.invalid += 1
        rep.invalid_reasons[reason.value] = rep.invalid_reasons.get(reason.value, 0) + 1
        rep.invalid_details[reason.value] = detail
        self.consecutive += 1

    def send(self, sink: DeadLetterSink) -> None:
        """Send the batch's rejected records in input order — the decoder's and the
        featurizer's (empty content) rejections are found in two passes — and make them
        durable before the batch's offsets are committed."""
        self._dead.sort(key=lambda d: (d[0].position.topic, d[0].position.partition,
                                       d[0].position.offset))  # fmt: skip
        for rec, reason, detail in self._dead:
            sink.send(rec, reason, detail)
        self._dead = []
        sink.flush()


class Decoder:
    """Decodes a batch's records with the configured field names and limits."""

    def __init__(
        self, fields: FieldNames, limits: DecodeLimits, use_labels: bool, max_invalid: int
    ) -> None:
        self.fields = fields
        self.limits = limits
        self.use_labels = use_labels
        self.max_invalid = max_invalid  # invalid records in a row that trip the breaker

    def decode(
        self,
        records: Sequence[Record],
        known_labels: dict[int, str],
        rejects: Rejections,
        rep: BatchReport,
        decoded: Sequence[DecodedDocument | Invalid] | None = None,
    ) -> tuple[list[DecodedDocument], list[Record], int]:
        """Decode records in order until the breaker trips; returns docs, their records and how
        many records were consumed. ``decoded``: each record's :meth:`decode_one`, computed
        ahead (the labels are checked here, against the labels known now)."""
        docs: list[DecodedDocument] = []
        kept: list[Record] = []
        limit = self.max_invalid
        labels: dict[int, str] = {}  # the batch's new labels, by uid
        use_labels = self.use_labels
        fields, limits = self.fields, self.limits
        for i, rec in enumerate(records):
            out = decode_record(rec.raw, fields, limits) if decoded is None else decoded[i]
            if not isinstance(out, Invalid) and out.label is not None and use_labels:
                clash = label_collision(out.label, known_labels, labels)
                out = out if clash is None else Invalid(InvalidReason.BAD_FIELD, clash)
            if isinstance(out, Invalid):
                rejects.reject(rec, out.reason, out.detail, rep)
                if rejects.consecutive >= limit:
                    return docs, kept, i + 1
            else:
                rejects.consecutive = 0
                docs.append(out)
                kept.append(rec)
        return docs, kept, len(records)

    def decode_one(self, rec: Record) -> DecodedDocument | Invalid:
        """One record's document, or why it is invalid, before the labels are checked: a
        function of its bytes alone."""
        return decode_record(rec.raw, self.fields, self.limits)

    def tripped(self, records: Sequence[Record], consumed: int, rejects: Rejections) -> bool:
        """Whether the breaker tripped in this batch (it stops after committing it)."""
        return consumed < len(records) or rejects.consecutive >= self.max_invalid


def consumed_offsets(
    records: Sequence[Record], consumed: int, first_offsets: dict[str, int]
) -> dict[str, int]:
    """The next offsets of a batch cut short by the breaker: after its consumed records."""
    next_offsets = dict(first_offsets)
    for r in records[:consumed]:
        key = partition_key(r.position.topic, r.position.partition)
        next_offsets[key] = r.position.offset + 1
    return next_offsets
