"""Raw record bytes → validated ``Document`` or an ``Invalid`` with a DLQ reason.

Shared by every source (Kafka, JSONL file, stdin) so all modes validate identically. The decoder
never raises: any byte string yields a Document or an Invalid.

Lenient conversions (documented contract): an integer ``id`` or ``label`` becomes its decimal
string; ``null`` counts as absent for every field; in ``context`` numbers and booleans become
strings (``true``/``false``) and ``null`` values are dropped; a context field holding a scalar
is one context field (its name → the value); a leading UTF-8 BOM is ignored.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from noveld.schema import (
    MAX_ID_CHARS,
    TS_MAX,
    TS_MIN,
    Document,
    InvalidReason,
    parse_rfc3339,
    trusted,
)

_orjson_loads: Callable[[str], Any] | None
try:  # optional fast path; stdlib json stays the reference behaviour
    import orjson

    _orjson_loads = orjson.loads
except ImportError:  # pragma: no cover - depends on the environment
    _orjson_loads = None

MAX_DEPTH = 64
"""Deepest accepted JSON nesting; deeper input is ``not_json`` whichever parser ran."""

_BOM = "\ufeff"
# orjson turns integers outside int64/uint64 into floats, stdlib json keeps them exact: any run of
# 19+ digits routes the record to stdlib json, so both parsers give identical results.
_DIGITS_AS_ZERO = bytes(0x30 if 0x30 <= b <= 0x39 else 0x2E for b in range(256))
_LONG_DIGIT_RUN = b"0" * 19


def _has_long_digit_run(raw: bytes) -> bool:
    """Whether ``raw`` holds 19+ consecutive ASCII digits (a translate and a substring search:
    far cheaper than a regex on long lines of numbers, such as embeddings)."""
    return _LONG_DIGIT_RUN in raw.translate(_DIGITS_AS_ZERO)


# A \uD800-\uDFFF escape may decode to a lone surrogate (stdlib json allows it, orjson does not).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


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


@dataclass(frozen=True)
class Invalid:
    """A rejected record: the DLQ reason and a short human-readable detail."""

    reason: InvalidReason
    detail: str


class _Reject(Exception):
    """Internal: carries an ``Invalid`` out of the field checks."""

    def __init__(self, reason: InvalidReason, detail: str) -> None:
        super().__init__(detail)
        self.invalid = Invalid(reason, detail)


def _a(noun: str) -> str:
    """The noun with its indefinite article ("an array", "a string")."""
    return ("an " if noun[0] in "aeiou" else "a ") + noun


def _type_name(value: Any) -> str:
    """JSON-ish type name of a parsed value, for detail messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _check_tree(obj: Any) -> str | None:
    """Walk a parsed value iteratively; return a problem (too deep, lone surrogate) or None."""
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return "string with an unpaired surrogate escape"
        elif isinstance(value, dict | list):
            if depth > MAX_DEPTH:
                return f"nested deeper than {MAX_DEPTH} levels"
            items = [*value.keys(), *value.values()] if isinstance(value, dict) else value
            stack.extend((v, depth + 1) for v in items)
    return None


def _parse(raw: bytes) -> Any:
    """Bytes → parsed JSON value; raises ``_Reject`` (undecodable / not_json)."""
    if not raw.strip():  # said plainly: "Expecting value: line 1 column 1" named nothing
        raise _Reject(
            InvalidReason.NOT_JSON,
            "empty record: no value (a Kafka tombstone, an empty message or a blank line)",
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Reject(
            InvalidReason.UNDECODABLE, f"not UTF-8: {exc.reason} at byte {exc.start}"
        ) from None
    if text.startswith(_BOM):
        text = text[1:]
    obj: Any = None
    parsed = False
    if _orjson_loads is not None and not _has_long_digit_run(raw):
        try:
            obj = _orjson_loads(text)
            parsed = True
        except (ValueError, RecursionError):
            parsed = False  # let stdlib json decide, it is the reference
    if not parsed:
        try:
            obj = json.loads(text)
        except RecursionError:
            raise _Reject(
                InvalidReason.NOT_JSON, f"nested deeper than {MAX_DEPTH} levels"
            ) from None
        except ValueError as exc:  # JSONDecodeError, or an int too long to convert
            raise _Reject(InvalidReason.NOT_JSON, f"not JSON: {str(exc)[:120]}") from None
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH or _SURROGATE_ESCAPE.search(raw):
        problem = _check_tree(obj)
        if problem is not None:
            raise _Reject(InvalidReason.NOT_JSON, problem)
    return obj


def _optional_str(obj: dict[str, Any], name: str) -> str | None:
    """A field that must be a string when present."""
    value = obj.get(name)
    if value is None or isinstance(value, str):
        return value
    raise _Reject(InvalidReason.BAD_FIELD, f"{name!r} must be a string, got {_type_name(value)}")


def _doc_id(obj: dict[str, Any], name: str) -> str:
    """The document id: a non-empty string of at most MAX_ID_CHARS; integers are converted."""
    value = obj.get(name)
    if value is None:
        raise _Reject(InvalidReason.MISSING_ID, f"no {name!r} field")
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise _Reject(InvalidReason.BAD_ID, f"{name!r} must be a string, got {_type_name(value)}")
    if not value:
        raise _Reject(InvalidReason.BAD_ID, f"{name!r} is empty")
    if len(value) > MAX_ID_CHARS:
        raise _Reject(
            InvalidReason.BAD_ID, f"{name!r} has {len(value)} chars, limit {MAX_ID_CHARS}"
        )
    return value


def _tokens(obj: dict[str, Any], name: str) -> list[str] | None:
    """Pre-tokenized content: a list of strings."""
    value = obj.get(name)
    if value is None:
        return None
    if not isinstance(value, list):
        raise _Reject(InvalidReason.BAD_FIELD, f"{name!r} must be an array of strings")
    for tok in value:
        if not isinstance(tok, str):
            raise _Reject(
                InvalidReason.BAD_FIELD, f"{name!r} holds {_a(_type_name(tok))}, not a string"
            )
    return value


def _embedding(obj: dict[str, Any], name: str, dim: int | None) -> list[float] | None:
    """Dense vector: a non-empty array of finite numbers of the namespace's dimension."""
    value = obj.get(name)
    if value is None:
        return None
    if not isinstance(value, list):
        raise _Reject(InvalidReason.BAD_FIELD, f"{name!r} must be an array of numbers")
    if value and set(map(type, value)) <= {float, int}:  # the common case, checked in bulk
        try:
            arr = np.asarray(value, dtype=np.float64)
        except OverflowError:  # an integer beyond the float range: the loop below says so
            pass
        else:
            if not np.isfinite(arr).all():
                raise _Reject(InvalidReason.NAN_EMBEDDING, f"{name!r} holds a non-finite value")
            if dim is not None and arr.shape[0] != dim:
                raise _Reject(
                    InvalidReason.WRONG_DIMENSION,
                    f"{name!r} has {arr.shape[0]} values, expected dimension {dim}",
                )
            fast: list[float] = arr.tolist()
            return fast
    out: list[float] = []
    for x in value:
        if isinstance(x, bool) or not isinstance(x, int | float):
            raise _Reject(
                InvalidReason.BAD_FIELD, f"{name!r} holds {_a(_type_name(x))}, not a number"
            )
        try:
            f = float(x)
        except OverflowError:  # integer beyond the float range
            f = math.inf
        if not math.isfinite(f):
            raise _Reject(InvalidReason.NAN_EMBEDDING, f"{name!r} holds a non-finite value")
        out.append(f)
    if not out or (dim is not None and len(out) != dim):
        expected = "non-empty" if dim is None else f"dimension {dim}"
        raise _Reject(
            InvalidReason.WRONG_DIMENSION, f"{name!r} has {len(out)} values, expected {expected}"
        )
    return out


def _label(obj: dict[str, Any], name: str) -> str | None:
    """Known category: string, integer (converted) or null."""
    value = obj.get(name)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    got = f"the number {value!r}" if isinstance(value, float) else _type_name(value)
    raise _Reject(
        InvalidReason.BAD_FIELD, f"{name!r} must be a string, an integer or null, got {got}"
    )


def _context(obj: dict[str, Any], names: str | tuple[str, ...]) -> dict[str, str]:
    """Categorical context from each named field: an object of string → scalar (its fields),
    or a scalar (one field: its name → the value); scalars converted, nulls dropped."""
    out: dict[str, str] = {}
    for name in (names,) if isinstance(names, str) else names:
        value = obj.get(name)
        if value is None:
            continue
        if isinstance(value, dict):
            out.update(_context_object(value, name))
        elif isinstance(value, str | int | float):
            out[name] = _context_value(value, repr(name))
        else:
            raise _Reject(
                InvalidReason.BAD_FIELD,
                f"{name!r} must be an object (of context fields) or a string, number or "
                f"boolean (one context field), got {_type_name(value)}",
            )
    return out


def _context_object(value: dict[str, Any], name: str) -> dict[str, str]:
    """The context fields of an object field, nulls dropped."""
    out: dict[str, str] = {}
    for key, v in value.items():
        if any(c < " " for c in key):  # the context vocabulary joins field and value with one
            raise _Reject(
                InvalidReason.BAD_FIELD,
                f"{name!r} field name {key[:32]!r} holds a control character",
            )
        if v is None:
            continue
        if isinstance(v, str | int | float):
            out[key] = _context_value(v, f"{name!r}.{key[:32]!r}")
        else:
            raise _Reject(
                InvalidReason.BAD_FIELD,
                f"{name!r}.{key[:32]!r} must be a string, number, boolean or null, got "
                f"{_type_name(v)}",
            )
    return out


def _context_value(v: str | int | float, where: str) -> str:
    """A context value as the vocabulary keeps it (booleans ``true``/``false``)."""
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if not math.isfinite(v):
        raise _Reject(InvalidReason.BAD_FIELD, f"{where} is not finite ({v})")
    return repr(v)


def _ts(obj: dict[str, Any], name: str) -> float | None:
    """Event time: epoch seconds (number) or an RFC 3339 string, within years 1-9999 (events
    carry it as an RFC 3339 time)."""
    value = obj.get(name)
    if value is None:
        return None
    if isinstance(value, str):
        try:
            f = parse_rfc3339(value)
        except (ValueError, OverflowError) as exc:
            raise _Reject(InvalidReason.BAD_FIELD, f"{name!r}: {str(exc)[:100]}") from None
    elif isinstance(value, int | float) and not isinstance(value, bool):
        try:
            f = float(value)
        except OverflowError:
            f = math.inf
        if not math.isfinite(f):
            raise _Reject(InvalidReason.BAD_FIELD, f"{name!r} is not a finite number")
    else:
        raise _Reject(
            InvalidReason.BAD_FIELD,
            f"{name!r} must be epoch seconds or an RFC 3339 string, got {_type_name(value)}",
        )
    if not TS_MIN <= f <= TS_MAX:
        raise _Reject(
            InvalidReason.BAD_FIELD, f"{name!r} is {f:g} epoch seconds, outside years 1-9999"
        )
    return f


def _decode(raw: bytes, fields: FieldNames, limits: DecodeLimits) -> Document:
    """The checks, in order; raises ``_Reject`` on the first problem."""
    if len(raw) > limits.max_doc_bytes:
        raise _Reject(  # not its size: the reader keeps at most one byte past the limit
            InvalidReason.OVERSIZE, f"longer than the limit of {limits.max_doc_bytes} bytes"
        )
    obj = _parse(raw)
    if not isinstance(obj, dict):
        raise _Reject(
            InvalidReason.NOT_OBJECT, f"top level must be an object, got {_type_name(obj)}"
        )
    doc_id = _doc_id(obj, fields.id)
    text = _optional_str(obj, fields.text)
    tokens = _tokens(obj, fields.tokens)
    embedding = _embedding(obj, fields.embedding, limits.embedding_dim)
    if text is None and tokens is None and embedding is None:
        raise _Reject(
            InvalidReason.NO_CONTENT,
            f"none of {fields.text!r}, {fields.tokens!r}, {fields.embedding!r}",
        )
    label = _label(obj, fields.label)
    context = _context(obj, fields.context)
    ts = _ts(obj, fields.ts)
    # Every field was checked above, so the (hot-path) pydantic validation is skipped;
    # tests/unit/test_decode.py checks that decoded documents also pass full validation.
    return trusted(
        Document,
        {
            "id": doc_id,
            "text": text,
            "tokens": tokens,
            "embedding": embedding,
            "label": label,
            "context": context,
            "ts": ts,
        },
    )


def decode_record(raw: bytes, fields: FieldNames, limits: DecodeLimits) -> Document | Invalid:
    """Decode and validate one record's bytes; never raises, bad input becomes ``Invalid``."""
    try:
        return _decode(raw, fields, limits)
    except _Reject as rej:
        return rej.invalid
