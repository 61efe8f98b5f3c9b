"""``noveld state show``: inspect a namespace's durable state."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from noveld.daemon.embedded import UserError
from noveld.state.base import NamespaceState, state_digest
from noveld.state.memory import SNAPSHOT_NAME, read_snapshot


def summarize(state: NamespaceState, outbox_pending: int) -> dict[str, Any]:
    """The fields printed by ``state show``."""
    stats = state.stats
    slots = stats.active_slots()
    return {
        "docs": state.counters.get("docs", 0),
        "invalid": state.counters.get("invalid", 0),
        "births": state.counters.get("births", 0),
        "batches": state.counters.get("batches", 0),
        "clusters": state.counters.get("clusters", int(stats.ictl[3])),
        "active_clusters": int(slots.shape[0]),
        "mass": float(stats.mass(slots).sum()),
        "tokens": float((stats.ntok[slots] * stats.scale).sum()),
        "vocab": len(state.vocab),
        "offsets": dict(sorted(state.offsets.items())),
        "outbox_pending": outbox_pending,
        "novelty_candidates": len(state.novelty.get("candidates", [])),
        "fingerprint": state.fingerprint,
        "digest": state_digest(state),
    }


def _cmd_show(ns: argparse.Namespace) -> int:
    if ns.redis_url:
        return _show_redis(ns)
    if ns.state_dir is None:
        raise UserError("state show needs --state-dir DIR or --redis-url URL")
    path: Path = ns.state_dir / SNAPSHOT_NAME
    if not path.exists():
        raise UserError(f"no state snapshot in {ns.state_dir}")
    try:
        state, outbox = read_snapshot(path)
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    _print(summarize(state, len(outbox)), ns.json)
    return 0


def _show_redis(ns: argparse.Namespace) -> int:
    from noveld.daemon.embedded import default_store
    from noveld.daemon.settings import load_settings
    from noveld.state.redis_store import RedisStore

    settings = load_settings(None, {"redis": {"url": ns.redis_url}, "namespace": ns.namespace})
    store = default_store(settings)
    assert isinstance(store, RedisStore)
    state = store.read()
    if state is None:
        raise UserError(f"namespace {ns.namespace!r} has no state in Redis")
    _print(summarize(state, store.outbox_length()), ns.json)
    return 0


def _print(info: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(info, indent=2))
        return
    for k, v in info.items():
        print(f"{k:>20}  {json.dumps(v) if isinstance(v, dict) else v}")


def add_state_commands(sub: Any) -> None:
    """Register ``state show``."""
    st = sub.add_parser("state", help="inspect durable state")
    st_sub = st.add_subparsers(dest="state_command", required=True, metavar="ACTION")
    show = st_sub.add_parser("show", help="summary of a namespace's state (counts, offsets, hash)")
    show.add_argument("--state-dir", type=Path, help="embedded state directory")
    show.add_argument("--redis-url", help="Redis holding the state (with --namespace)")
    show.add_argument("--namespace", default="default", help="namespace in Redis (default)")
    show.add_argument("--json", action="store_true", help="JSON output")
    show.set_defaults(func=_cmd_show)
