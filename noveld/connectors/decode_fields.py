"""The field checks of a parsed record: each returns a field's value, leniently converted (see
:mod:`noveld.connectors.decode`), or raises :class:`Reject` with the dead-letter reason."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from noveld.schema import MAX_ID_CHARS, TS_MAX, TS_MIN, InvalidReason, parse_rfc3339


@dataclass(frozen=True)
class Invalid:
    """A rejected record: the DLQ reason and a short human-readable detail."""

    reason: InvalidReason
    detail: str


class Reject(Exception):
    """Carries an ``Invalid`` out of the checks, to ``decode_record``."""

    def __init__(self, reason: InvalidReason, detail: str) -> None:
        super().__init__(detail)
        self.invalid = Invalid(reason, detail)


def _a(noun: str) -> str:
    """The noun with its indefinite article ("an array", "a string")."""
    return ("an " if noun[0] in "aeiou" else "a ") + noun


def type_name(value: Any) -> str:
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


def optional_str(obj: dict[str, Any], name: str) -> str | None:
    """A field that must be a string when present."""
    value = obj.get(name)
    if value is None or isinstance(value, str):
        return value
    raise Reject(InvalidReason.BAD_FIELD, f"{name!r} must be a string, got {type_name(value)}")


def doc_id(obj: dict[str, Any], name: str) -> str:
    """The document id: a non-empty string of at most MAX_ID_CHARS; integers are converted."""
    value = obj.get(name)
    if value is None:
        raise Reject(InvalidReason.MISSING_ID, f"no {name!r} field")
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise Reject(InvalidReason.BAD_ID, f"{name!r} must be a string, got {type_name(value)}")
    if not value:
        raise Reject(InvalidReason.BAD_ID, f"{name!r} is empty")
    if len(value) > MAX_ID_CHARS:
        raise Reject(InvalidReason.BAD_ID, f"{name!r} has {len(value)} chars, limit {MAX_ID_CHARS}")
    return value


def tokens(obj: dict[str, Any], name: str) -> list[str] | None:
    """Pre-tokenized content: a list of strings."""
    value = obj.get(name)
    if value is None:
        return None
    if not isinstance(value, list):
        raise Reject(InvalidReason.BAD_FIELD, f"{name!r} must be an array of strings")
    for tok in value:
        if not isinstance(tok, str):
            raise Reject(
                InvalidReason.BAD_FIELD, f"{name!r} holds {_a(type_name(tok))}, not a string"
            )
    return value


def embedding(obj: dict[str, Any], name: str, dim: int | None) -> list[float] | None:
    """Dense vector: a non-empty array of finite numbers of the namespace's dimension."""
    value = obj.get(name)
    if value is None:
        return None
    if not isinstance(value, list):
        raise Reject(InvalidReason.BAD_FIELD, f"{name!r} must be an array of numbers")
    if value and set(map(type, value)) <= {float, int}:  # the common case, checked in bulk
        try:
            arr = np.asarray(value, dtype=np.float64)
        except OverflowError:  # an integer beyond the float range: the loop below says so
            pass
        else:
            if not np.isfinite(arr).all():
                raise Reject(InvalidReason.NAN_EMBEDDING, f"{name!r} holds a non-finite value")
            if dim is not None and arr.shape[0] != dim:
                raise Reject(
                    InvalidReason.WRONG_DIMENSION,
                    f"{name!r} has {arr.shape[0]} values, expected dimension {dim}",
                )
            fast: list[float] = arr.tolist()
            return fast
    out: list[float] = []
    for x in value:
        if isinstance(x, bool) or not isinstance(x, int | float):
            raise Reject(
                InvalidReason.BAD_FIELD, f"{name!r} holds {_a(type_name(x))}, not a number"
            )
        try:
            f = float(x)
        except OverflowError:  # integer beyond the float range
            f = math.inf
        if not math.isfinite(f):
            raise Reject(InvalidReason.NAN_EMBEDDING, f"{name!r} holds a non-finite value")
        out.append(f)
    if not out or (dim is not None and len(out) != dim):
        expected = "non-empty" if dim is None else f"dimension {dim}"
        raise Reject(
            InvalidReason.WRONG_DIMENSION, f"{name!r} has {len(out)} values, expected {expected}"
        )
    return out


def label(obj: dict[str, Any], name: str) -> str | None:
    """Known category: string, integer (converted) or null."""
    value = obj.get(name)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    got = f"the number {value!r}" if isinstance(value, float) else type_name(value)
    raise Reject(
        InvalidReason.BAD_FIELD, f"{name!r} must be a string, an integer or null, got {got}"
    )


def context(obj: dict[str, Any], names: str | tuple[str, ...]) -> dict[str, str]:
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
            raise Reject(
                InvalidReason.BAD_FIELD,
                f"{name!r} must be an object (of context fields) or a string, number or "
                f"boolean (one context field), got {type_name(value)}",
            )
    return out


def _context_object(value: dict[str, Any], name: str) -> dict[str, str]:
    """The context fields of an object field, nulls dropped."""
    out: dict[str, str] = {}
    for key, v in value.items():
        if any(c < " " for c in key):  # the context vocabulary joins field and value with one
            raise Reject(
                InvalidReason.BAD_FIELD,
                f"{name!r} field name {key[:32]!r} holds a control character",
            )
        if v is None:
            continue
        if isinstance(v, str | int | float):
            out[key] = _context_value(v, f"{name!r}.{key[:32]!r}")
        else:
            raise Reject(
                InvalidReason.BAD_FIELD,
                f"{name!r}.{key[:32]!r} must be a string, number, boolean or null, got "
                f"{type_name(v)}",
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
        raise Reject(InvalidReason.BAD_FIELD, f"{where} is not finite ({v})")
    return repr(v)


def ts(obj: dict[str, Any], name: str) -> float | None:
    """Event time: epoch seconds (number) or an RFC 3339 string, within years 1-9999 (events
    carry it as an RFC 3339 time)."""
    value = obj.get(name)
    if value is None:
        return None
    if isinstance(value, str):
        try:
            f = parse_rfc3339(value)
        except (ValueError, OverflowError) as exc:
            raise Reject(InvalidReason.BAD_FIELD, f"{name!r}: {str(exc)[:100]}") from None
    elif isinstance(value, int | float) and not isinstance(value, bool):
        try:
            f = float(value)
        except OverflowError:
            f = math.inf
        if not math.isfinite(f):
            raise Reject(InvalidReason.BAD_FIELD, f"{name!r} is not a finite number")
    else:
        raise Reject(
            InvalidReason.BAD_FIELD,
            f"{name!r} must be epoch seconds or an RFC 3339 string, got {type_name(value)}",
        )
    if not TS_MIN <= f <= TS_MAX:
        raise Reject(
            InvalidReason.BAD_FIELD, f"{name!r} is {f:g} epoch seconds, outside years 1-9999"
        )
    return f
