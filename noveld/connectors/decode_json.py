"""Record bytes → parsed JSON value, the same whichever parser runs: orjson when installed (the
fast path), stdlib json as the reference wherever the two could differ (integers too long for
orjson, lone surrogate escapes, nesting deeper than :data:`MAX_DEPTH`)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from noveld.connectors.decode_fields import Reject
from noveld.schema import InvalidReason

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


def parse_json(raw: bytes) -> Any:
    """Bytes → parsed JSON value; raises ``Reject`` (undecodable / not_json)."""
    if not raw.strip():  # said plainly: "Expecting value: line 1 column 1" named nothing
        raise Reject(
            InvalidReason.NOT_JSON,
            "empty record: no value (a Kafka tombstone, an empty message or a blank line)",
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Reject(
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
            raise Reject(InvalidReason.NOT_JSON, f"nested deeper than {MAX_DEPTH} levels") from None
        except ValueError as exc:  # JSONDecodeError, or an int too long to convert
            raise Reject(InvalidReason.NOT_JSON, f"not JSON: {str(exc)[:120]}") from None
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH or _SURROGATE_ESCAPE.search(raw):
        problem = _check_tree(obj)
        if problem is not None:
            raise Reject(InvalidReason.NOT_JSON, problem)
    return obj
