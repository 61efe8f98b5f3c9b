"""Story summaries: a bounded, mergeable digest of each live cluster for the operator's view.

Pure: plain JSON-able dicts in and out; no clock (the caller passes each document's time).
The live set is held in columns (:mod:`noveld.models.story_table`); this module is the stored
form, its checks and the reference fold the table and the Redis commit script follow. A
summary is::

    {"born": t, "last": t, "docs": n, "width": W, "head": h, "counts": [c_0 … c_{B-1}],
     "terms": [[word, share], …], "exemplars": [[doc_id, text_or_null], …]}

``counts`` is a ring of the ``B`` most recent buckets of ``W`` seconds: ``counts[-1]`` holds the
documents of bucket ``head`` (= ⌊t / W⌋), ``counts[i]`` those of bucket ``head - (B-1) + i``.
Summaries fold (:func:`fold`): a batch's delta into the stored summary, a merged cluster's into
its survivor's, one writer's into another's. The Redis store's commit script
(``noveld/state/redis/commit.lua``) folds the same way; this module is its oracle.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

Summary = dict[str, Any]


@dataclass(frozen=True)
class StoryLimits:
    """The bounds of one summary and of the whole set."""

    bucket_seconds: int = 3600
    buckets: int = 24
    exemplars: int = 3
    terms: int = 8
    text_chars: int = 200
    exemplar_text: bool = True
    max_stories: int = 10_000


def shift(counts: Sequence[int], head: int, to_head: int, buckets: int) -> list[int]:
    """A ring ending at bucket ``head`` re-expressed as ``buckets`` counts ending at
    ``to_head`` ≥ ``head``: older buckets fall off the front, empty ones enter at the back."""
    counts = list(counts)[-buckets:]
    counts = [0] * (buckets - len(counts)) + counts
    gap = to_head - head
    if gap <= 0:
        return counts
    if gap >= buckets:
        return [0] * buckets
    return counts[gap:] + [0] * gap


def fold(base: Summary | None, add: Summary, limits: StoryLimits, take_terms: bool) -> Summary:
    """``base`` and ``add`` as one summary: counts added bucket by bucket (a summary counted
    with another bucket width adds none), the earlier birth, the later last-seen, ``base``'s
    exemplars first then ``add``'s (bounded, no id twice);
    terms from ``add`` when ``take_terms`` and it has some (a batch's fresh terms), else
    ``base``'s (a merge's survivor keeps its own)."""
    if base is None:
        base = {"born": add["born"], "last": add["last"], "docs": 0, "width": add["width"],
                "head": add["head"], "counts": [], "terms": [], "exemplars": []}  # fmt: skip
    b = limits.buckets
    w = limits.bucket_seconds
    head = max((int(s["head"]) for s in (base, add) if int(s["width"]) == w), default=0)
    out_counts = [0] * b
    for s in (base, add):
        if int(s["width"]) != limits.bucket_seconds:
            continue  # counted with another bucket width: not comparable
        ring = shift(s["counts"], int(s["head"]), head, b)
        out_counts = [x + y for x, y in zip(out_counts, ring, strict=True)]
    seen: set[str] = set()
    exemplars: list[list[Any]] = []
    for ex in [*base["exemplars"], *add["exemplars"]]:
        if len(exemplars) >= limits.exemplars:
            break
        if ex[0] in seen:
            continue
        seen.add(ex[0])
        exemplars.append(list(ex))
    terms = add["terms"] if take_terms and add["terms"] else base["terms"]
    return {
        "born": min(float(base["born"]), float(add["born"])),
        "last": max(float(base["last"]), float(add["last"])),
        "docs": int(base["docs"]) + int(add["docs"]),
        "width": limits.bucket_seconds,
        "head": head,
        "counts": out_counts,
        "terms": [list(t) for t in terms[: limits.terms]],
        "exemplars": exemplars,
    }


def apply_delta(
    stories: dict[str, Summary],
    touched: dict[str, Summary],
    merges: Sequence[tuple[int, int]],
    dropped: Sequence[int],
    limits: StoryLimits,
) -> None:
    """A batch's change to the stored summaries (uid as a decimal string → summary), in the
    commit script's order: the touched clusters' deltas (a new summary only while fewer than
    ``limits.max_stories`` are kept), then merged clusters folded into their survivors, then
    retired and merged clusters dropped."""
    for key, add in touched.items():
        base = stories.get(key)
        if base is None and len(stories) >= limits.max_stories:
            continue
        stories[key] = fold(base, add, limits, take_terms=True)
    for uid, into in merges:
        gone = stories.pop(str(uid), None)
        if gone is None:
            continue
        survivor = stories.get(str(into))
        if survivor is None and len(stories) >= limits.max_stories:
            continue
        stories[str(into)] = fold(survivor, gone, limits, take_terms=survivor is None)
    for uid in dropped:
        stories.pop(str(uid), None)


def recent_docs(summary: Summary, now_bucket: int, window: int) -> int:
    """Documents of the ``window`` buckets ending at ``now_bucket`` (the stream's newest)."""
    counts = summary["counts"]
    head = int(summary["head"])
    total = 0
    for i, c in enumerate(counts):
        bucket = head - (len(counts) - 1) + i
        if now_bucket - window < bucket <= now_bucket:
            total += int(c)
    return total


def sparkline(summary: Summary, now_bucket: int, buckets: int) -> list[int]:
    """The ``buckets`` counts ending at ``now_bucket``, oldest first (zeros where quiet)."""
    head = int(summary["head"])
    if head > now_bucket:  # cannot be: now is the newest head; keep the newest anyway
        now_bucket = head
    return shift(summary["counts"], head, now_bucket, buckets)


def _is_num(v: object) -> bool:
    return type(v) in (int, float) and bool(np.isfinite(float(v)))  # type: ignore[arg-type]


def summary_problem(s: Any) -> str | None:
    """Why a stored summary cannot be used (its shape), or None when it can."""
    if not isinstance(s, dict):
        return "is not an object"
    for key in ("born", "last"):
        if not _is_num(s.get(key)):
            return f"has no numeric {key!r}"
    for key in ("docs", "width", "head"):
        if type(s.get(key)) is not int:
            return f"has no whole number {key!r}"
    if int(s["width"]) <= 0:
        return "has a bucket width ≤ 0"
    counts = s.get("counts")
    if not isinstance(counts, list) or any(type(c) is not int or c < 0 for c in counts):
        return "has counts that are not whole numbers ≥ 0"
    terms = s.get("terms")
    if not isinstance(terms, list) or not all(
        isinstance(t, list) and len(t) == 2 and isinstance(t[0], str) and _is_num(t[1])
        for t in terms
    ):
        return "has terms that are not [word, share] pairs"
    exemplars = s.get("exemplars")
    if not isinstance(exemplars, list) or not all(
        isinstance(e, list) and len(e) == 2 and isinstance(e[0], str)
        and (e[1] is None or isinstance(e[1], str))
        for e in exemplars
    ):  # fmt: skip
        return "has exemplars that are not [doc id, text or null] pairs"
    return None


def stories_problem(stories: Any) -> tuple[str, str] | None:
    """(field, what is wrong) for a stored set of summaries, or None when it can be used."""
    if not isinstance(stories, dict):
        return "stories", "is not an object of cluster uid → summary"
    for uid, s in stories.items():
        if not (uid.isascii() and uid.isdigit()):
            return "stories", f"names {uid!r}, not a cluster uid"
        problem = summary_problem(s)
        if problem is not None:
            return f"stories[{uid!r}]", problem
    return None
