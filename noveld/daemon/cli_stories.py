"""``noveld stories``: a namespace's live stories — size, recent growth, top terms, exemplars —
read from a state dir's snapshot or from Redis while the daemon runs (read-only: the snapshot
is replaced atomically by rename, Redis is read in one transaction)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from noveld.daemon.cli_state import _redis_store, _resolve_target
from noveld.daemon.errors import UserError
from noveld.daemon.stories_view import (
    DEFAULT_WINDOW,
    SORT_KEYS,
    StoriesView,
    stories_view,
    story_of_doc,
)
from noveld.schema import format_rfc3339
from noveld.state.base import NamespaceState
from noveld.state.memory import SNAPSHOT_NAME, read_snapshot

_BARS = "▁▂▃▄▅▆▇█"

DESCRIPTION = """\
List a namespace's live stories (clusters) from the summaries the daemon keeps in its state:
each with its id, size, documents in the recent window, birth time, top terms, exemplar
documents and known label. Safe while the daemon runs: a state dir is read from its last
snapshot (taken every --snapshot-interval seconds), Redis as of its last commit.

Growth is counted in buckets of event time (stories.bucket_seconds, default 1 hour); "now" is
the newest event time the namespace has seen, and "recent" the documents of the last --window
buckets. --doc ID names the story a document is in when the document is one of the exemplars
the state keeps (the first stories.exemplars documents of each story); the state does not keep
every document's story (run with --emit-assignments for that)."""


def add_stories_command(sub: Any) -> None:
    """Register ``noveld stories``."""
    p = sub.add_parser(
        "stories",
        help="list a namespace's live stories (growth, size, top terms, exemplars)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--state-dir", type=Path, help="embedded state directory")
    p.add_argument("--redis-url", help="Redis holding the state (with --namespace)")
    p.add_argument(
        "--namespace", help="namespace in Redis (default: NOVELD_NAMESPACE, --config, default)"
    )
    p.add_argument("--config", type=Path, help="TOML config file (as the daemon's)")
    p.add_argument(
        "--sort",
        choices=SORT_KEYS,
        default="growth",
        help="growth: most recent documents first (default); size: largest first; age: "
        "longest-lived first; birth: newest first",
    )
    p.add_argument("--limit", type=int, default=20, help="stories shown at most (default 20)")
    p.add_argument(
        "--window",
        type=int,
        default=DEFAULT_WINDOW,
        metavar="BUCKETS",
        help=f"growth buckets counted as recent (default {DEFAULT_WINDOW})",
    )
    p.add_argument("--doc", metavar="ID", help="the story document ID is in (if the state knows)")
    p.add_argument("--json", action="store_true", help="JSON output (docs/operations.md)")
    p.set_defaults(func=cmd_stories)


def _read(ns: argparse.Namespace) -> NamespaceState:
    """The namespace's state, read-only."""
    if ns.redis_url:
        state: NamespaceState | None = _redis_store(ns).read()
        if state is None:
            raise UserError(f"namespace {ns.namespace!r} has no state in Redis")
        return state
    state_dir: Path = ns.state_dir
    if not state_dir.exists():
        raise UserError(f"state dir {state_dir} does not exist")
    if not state_dir.is_dir():
        raise UserError(f"{state_dir} is not a directory")
    path = state_dir / SNAPSHOT_NAME
    if not path.exists():
        raise UserError(
            f"no state snapshot in {state_dir} (a run writes its first one after "
            "--snapshot-interval seconds)"
        )
    try:
        return read_snapshot(path)[0]
    except ValueError as exc:
        raise UserError(str(exc)) from exc


def cmd_stories(ns: argparse.Namespace) -> int:
    """``noveld stories``."""
    if ns.limit < 1:
        raise UserError(f"--limit must be ≥ 1, got {ns.limit}")
    if ns.window < 1:
        raise UserError(f"--window must be ≥ 1, got {ns.window}")
    _resolve_target(ns)
    if (ns.state_dir is None) == (ns.redis_url is None):
        raise UserError(
            "stories needs exactly one of --state-dir DIR or --redis-url URL (or one of "
            "state.dir, redis.url in --config or the environment: NOVELD_STATE__DIR, "
            "NOVELD_REDIS__URL)"
        )
    state = _read(ns)
    if ns.doc is not None:
        return _which_story(ns, state)
    view = stories_view(state, ns.namespace, ns.sort, ns.window, ns.limit)
    if ns.json:
        print(json.dumps(view.to_json(), indent=2, ensure_ascii=False))
    else:
        print(render(view))
    return 0


def _which_story(ns: argparse.Namespace, state: NamespaceState) -> int:
    uid = story_of_doc(state, ns.doc)
    if uid is None:
        n = max((len(e) for e in state.stories.exemplars.values()), default=0)
        why = (
            f"document {ns.doc!r} is not among the exemplars the state keeps (up to {n} per "
            "live story, its first documents); the state does not record every document's "
            "story. Run with --emit-assignments to get each document's cluster as an event"
        )
        if ns.json:
            print(json.dumps({"doc_id": ns.doc, "story": None, "reason": why}, indent=2))
        else:
            print(why)
        return 0
    view = stories_view(state, ns.namespace, "growth", ns.window)
    row = next(r for r in view.rows if r.uid == uid)
    if ns.json:
        print(json.dumps({"doc_id": ns.doc, "story": row.to_json(view.now or 0.0)}, indent=2,
                         ensure_ascii=False))  # fmt: skip
    else:
        one = StoriesView(view.namespace, view.now, view.bucket_seconds, view.window, "growth",
                          1, [row])  # fmt: skip
        print(f"document {ns.doc!r} is in story c{uid}\n" + render(one, header=False))
    return 0


def _bars(counts: list[int]) -> str:
    top = max(counts, default=0)
    if top == 0:
        return _BARS[0] * len(counts)
    return "".join(_BARS[0] if c == 0 else _BARS[1 + (c * 6) // top] for c in counts)


def _hours(seconds: int) -> str:
    return f"{seconds // 3600}h" if seconds % 3600 == 0 else f"{seconds}s"


def render(view: StoriesView, header: bool = True) -> str:
    """The text listing of ``noveld stories``."""
    lines = []
    if header:
        now = "no documents yet" if view.now is None else f"now {format_rfc3339(view.now)}"
        shown = f"{len(view.rows)} of {view.total}" if len(view.rows) < view.total else view.total
        lines.append(
            f"namespace {view.namespace} · {shown} live stories · {now} · recent = last "
            f"{view.window} × {_hours(view.bucket_seconds)} · sorted by {view.sort}"
        )
    for r in view.rows:
        label = f"  label {r.label}" if r.label is not None else ""
        lines.append(
            f"\nc{r.uid}  size {r.size:g}  recent {r.recent}  born {format_rfc3339(r.born)}"
            f"  last {format_rfc3339(r.last)}{label}"
        )
        lines.append(f"  growth {_bars(r.growth)}")
        if r.terms:
            lines.append("  terms  " + ", ".join(str(w) for w, _ in r.terms))
        for doc_id, text in r.exemplars:
            shown_text = "" if text is None else " " + " ".join(str(text).split())[:100]
            lines.append(f"  - {doc_id}:{shown_text}")
    if not view.rows:
        lines.append("(no live stories)")
    return "\n".join(lines)
