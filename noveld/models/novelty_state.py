"""Validation of a stored novelty state (the tracker's and the pipeline's entries), so both
stores reject a damaged one with a message naming the field."""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any

from noveld.models.novelty import Candidate

#: the entries of the novelty state a namespace stores: the tracker's (:meth:`to_json`) and the
#: pipeline's (announced clusters, known labels, the last vocabulary check, and per file or
#: stdin input the checksum of the lines committed from it)
STATE_KEYS = frozenset(
    {"candidates", "dropped", "announced", "known", "vocabulary_checked_at", "inputs"}
)
_CANDIDATE_KEYS = frozenset(f.name for f in fields(Candidate))
_CANDIDATE_REQUIRED = frozenset(
    f.name for f in fields(Candidate) if f.default is MISSING and f.default_factory is MISSING
)
_MEMBER_KEYS = ("doc_id", "at", "index", "words", "counts")
_INT64_MAX = (1 << 63) - 1


def json_kind(value: Any) -> str:
    """What a parsed JSON value is, in JSON's words."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    names = {dict: "object", list: "list", str: "string", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _is_int(v: object) -> bool:
    """A JSON integer (not a boolean) that fits an int64."""
    return type(v) is int and -_INT64_MAX - 1 <= v <= _INT64_MAX


def _is_count(v: object) -> bool:
    return _is_int(v) and v >= 0  # type: ignore[operator]


def _is_int_text(text: object) -> bool:
    """An integer written out (a JSON object's key for a cluster uid)."""
    return isinstance(text, str) and text.removeprefix("-").isdigit() and text.isascii()


def state_problem(data: Any, n_words: int | None = None) -> tuple[str, str] | None:
    """Where and how stored ``data`` is not a novelty state (:data:`STATE_KEYS`) the tracker and
    the pipeline restore — ``("novelty.candidates[0]", "lacks 'born_at'")`` — or None. With
    ``n_words``, members' word ids must be vocabulary ids. Cheap: the candidates are the few
    clusters awaiting confirmation. Both stores check what they load with it."""
    if not isinstance(data, dict):
        return "novelty", f"is a JSON {json_kind(data)}, not an object"
    unknown = sorted(set(data) - STATE_KEYS)
    if unknown:
        return "novelty", f"holds an unknown entry {unknown[0]!r}"
    for key in ("dropped", "vocabulary_checked_at"):
        if key in data and not _is_count(data[key]):
            return f"novelty.{key}", f"is not a whole number ≥ 0 (a JSON {json_kind(data[key])})"
    announced = data.get("announced", [])
    if not isinstance(announced, list) or not all(_is_int(u) for u in announced):
        return "novelty.announced", "is not a list of cluster uids"
    known = data.get("known", {})
    if not isinstance(known, dict) or not all(
        isinstance(label, str) and _is_int_text(k) for k, label in known.items()
    ):
        return "novelty.known", "is not an object of cluster uid → label"
    inputs = data.get("inputs", {})
    if not isinstance(inputs, dict) or not all(
        isinstance(v, dict)
        and v.keys() == {"offset", "crc32"}
        and _is_count(v["offset"])
        and _is_count(v["crc32"])
        and v["crc32"] < 1 << 32
        for v in inputs.values()
    ):
        return "novelty.inputs", "is not an object of input → {offset, crc32}"
    candidates = data.get("candidates", [])
    if not isinstance(candidates, list):
        return "novelty.candidates", f"is a JSON {json_kind(candidates)}, not a list"
    for i, cand in enumerate(candidates):
        problem = _candidate_problem(cand, n_words)
        if problem is not None:
            where, what = problem
            return f"novelty.candidates[{i}]{where}", what
    return None


def _candidate_problem(cand: Any, n_words: int | None) -> tuple[str, str] | None:
    """Where (below the candidate) and how ``cand`` is not a stored :class:`Candidate`."""
    if not isinstance(cand, dict):
        return "", f"is a JSON {json_kind(cand)}, not an object"
    missing = sorted(_CANDIDATE_REQUIRED - cand.keys())
    if missing:
        return "", f"lacks {missing[0]!r}"
    unknown = sorted(cand.keys() - _CANDIDATE_KEYS)
    if unknown:
        return "", f"holds an unknown field {unknown[0]!r}"
    exemplars, members = cand.get("exemplars", []), cand.get("members", [])
    if not (
        _is_int(cand["uid"])
        and isinstance(cand["founding_doc_id"], str)
        and isinstance(cand["born_at"], dict)
        and _is_int(cand["born_index"])
        and type(cand["novelty_score"]) in (int, float)
        and _is_count(cand.get("size", 0))
        and isinstance(exemplars, list)
        and all(isinstance(x, str) for x in exemplars)
        and isinstance(members, list)
    ):
        return "", "has a field of the wrong type"
    for j, mem in enumerate(members):
        if not (
            isinstance(mem, dict)
            and all(k in mem for k in _MEMBER_KEYS)
            and isinstance(mem["doc_id"], str)
            and isinstance(mem["at"], dict)
            and _is_int(mem["index"])
            and isinstance(mem["words"], list)
            and isinstance(mem["counts"], list)
            and len(mem["words"]) == len(mem["counts"])
            and all(_is_int(c) for c in mem["counts"])
            and all(_is_int(w) for w in mem["words"])
        ):
            return f".members[{j}]", "is not a member (doc_id, at, index, words, counts)"
        if n_words is not None and not all(0 <= w < n_words for w in mem["words"]):
            return f".members[{j}].words", f"holds a word id beyond the vocab's {n_words}"
    return None
