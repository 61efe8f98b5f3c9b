"""Raw record bytes → a checked ``DecodedDocument`` (the fields of a valid ``Document``) or an
``Invalid`` with a DLQ reason.

Shared by every source (Kafka, JSONL file, stdin) so all modes validate identically. The decoder
never raises: any byte string yields a DecodedDocument or an Invalid.

Lenient conversions (documented contract): an integer ``id`` or ``label`` becomes its decimal
string; ``null`` counts as absent for every field; in ``context`` numbers and booleans become
strings (``true``/``false``) and ``null`` values are dropped; a context field holding a scalar
is one context field (its name → the value); a leading UTF-8 BOM is ignored.
"""

from __future__ import annotations

from dataclasses import dataclass

from noveld.connectors import decode_fields as check
from noveld.connectors.decode_fields import Invalid, Reject, type_name
from noveld.connectors.decode_json import parse_json
from noveld.schema import DecodedDocument, InvalidReason

__all__ = ["DecodeLimits", "FieldNames", "Invalid", "decode_record"]


@dataclass(frozen=True)
class FieldNames:
    """Names of the input fields, configurable so existing topics and files can be fed as is."""

    id: str = "id"
    text: str = "text"
    tokens: str = "tokens"
    embedding: str = "embedding"
    label: str = "label"
    context: str | tuple[str, ...] = "context"
    ts: str = "ts"

    def __post_init__(self) -> None:
        if isinstance(self.context, list):  # from the settings' JSON-shaped dump
            object.__setattr__(self, "context", tuple(self.context))


@dataclass(frozen=True)
class DecodeLimits:
    """Validation limits: raw size bound and, when known, the namespace's embedding dimension."""

    max_doc_bytes: int = 1_000_000
    embedding_dim: int | None = None


def _decode(raw: bytes, fields: FieldNames, limits: DecodeLimits) -> DecodedDocument:
    """The checks, in order; raises ``Reject`` on the first problem."""
    if len(raw) > limits.max_doc_bytes:
        raise Reject(  # not its size: the reader keeps at most one byte past the limit
            InvalidReason.OVERSIZE, f"longer than the limit of {limits.max_doc_bytes} bytes"
        )
    obj = parse_json(raw)
    if not isinstance(obj, dict):
        raise Reject(InvalidReason.NOT_OBJECT, f"top level must be an object, got {type_name(obj)}")
    doc_id = check.doc_id(obj, fields.id)
    text = check.optional_str(obj, fields.text)
    tokens = check.tokens(obj, fields.tokens)
    embedding = check.embedding(obj, fields.embedding, limits.embedding_dim)
    if text is None and tokens is None and embedding is None:
        raise Reject(
            InvalidReason.NO_CONTENT,
            f"none of {fields.text!r}, {fields.tokens!r}, {fields.embedding!r}",
        )
    label = check.label(obj, fields.label)
    context = check.context(obj, fields.context)
    ts = check.ts(obj, fields.ts)
    # every field was checked above, so the result is a valid Document without pydantic's
    # per-record cost; tests/unit/connectors/test_decode.py checks that decoded documents also
    # pass full validation
    return DecodedDocument(doc_id, text, tokens, embedding, label, context, ts)


def decode_record(
    raw: bytes, fields: FieldNames, limits: DecodeLimits
) -> DecodedDocument | Invalid:
    """Decode and validate one record's bytes; never raises, bad input becomes ``Invalid``."""
    try:
        return _decode(raw, fields, limits)
    except Reject as rej:
        return rej.invalid
