"""``noveld state show|export|import|set-offset``: inspect, back up and move a namespace's
durable state, and set an input's stored offset (the operator's decision for a Kafka partition
the daemon holds, or for a rotated input file).

The export file is the embedded store's snapshot format (a versioned ``.npz`` of arrays plus a
JSON header, no pickle), so an export can also seed a ``--state-dir``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

from noveld.daemon.errors import UserError
from noveld.models.hdp import live_clusters
from noveld.models.vocabulary import Vocabulary
from noveld.state.base import NamespaceState, state_digest
from noveld.state.dir_lock import StateDirBusy, hold_state_dir
from noveld.state.memory import SNAPSHOT_NAME, read_export, read_snapshot, write_snapshot


def summarize(state: NamespaceState, outbox_pending: int) -> dict[str, Any]:
    """The fields printed by ``state show``."""
    stats = state.stats
    slots = stats.active_slots()
    vocab = Vocabulary.from_list(state.vocab, state.vocab_gone, state.vocab_checked)
    return {
        "docs": state.counters.get("docs", 0),
        "invalid": state.counters.get("invalid", 0),
        "births": state.counters.get("births", 0),
        "batches": state.counters.get("batches", 0),
        "clusters": state.counters.get("clusters", int(stats.ictl[3])),
        "active_clusters": live_clusters(stats),
        "mass": float(stats.mass(slots).sum()),
        "tokens": float((stats.ntok[slots] * stats.scale).sum()),
        "vocab": len(state.vocab),
        "words_seen": len(vocab) + vocab.dropped,  # V: with the words compacted out
        "offsets": dict(sorted(state.offsets.items())),
        "outbox_pending": outbox_pending,
        "novelty_candidates": len(state.novelty.get("candidates", [])),
        "novelty_dropped": int(state.novelty.get("dropped", 0)),  # never reached min_size
        "fingerprint": state.fingerprint,
        "digest": state_digest(state),
    }


def _cmd_show(ns: argparse.Namespace) -> int:
    _resolve_target(ns)
    _need_one_target(ns, "show")
    if ns.redis_url:
        return _show_redis(ns)
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
    from noveld.daemon.settings import load_settings
    from noveld.daemon.startup import default_store
    from noveld.state.redis.store import RedisStore

    overrides = {"redis": {"url": ns.redis_url}, "namespace": ns.namespace}
    store = default_store(load_settings(ns.config, overrides))
    assert isinstance(store, RedisStore)
    state = store.read()
    if state is None:
        raise UserError(f"namespace {ns.namespace!r} has no state in Redis")
    _print(summarize(state, store.outbox_length()), ns.json)
    return 0


def _redis_store(ns: argparse.Namespace) -> Any:
    from noveld.daemon.settings import load_settings
    from noveld.daemon.startup import default_store

    overrides = {"redis": {"url": ns.redis_url}, "namespace": ns.namespace}
    return default_store(load_settings(ns.config, overrides))


def _resolve_target(ns: argparse.Namespace) -> None:
    """Fill in what the command line left out from the settings — ``--config`` TOML, then
    ``NOVELD_*`` environment — as every other command reads them: the namespace, and the
    target when neither ``--state-dir`` nor ``--redis-url`` was given (in a deployment's
    container, ``noveld state show`` finds the daemon's Redis and namespace by itself)."""
    from noveld.daemon.settings import load_settings

    settings = load_settings(ns.config, {} if ns.namespace is None else {"namespace": ns.namespace})
    ns.namespace = settings.namespace
    if ns.state_dir is None and ns.redis_url is None:
        url = settings.redis.url
        ns.redis_url = None if url is None else url.get_secret_value()
        ns.state_dir = settings.state.dir


def _need_one_target(ns: argparse.Namespace, verb: str) -> None:
    if (ns.state_dir is None) == (ns.redis_url is None):
        raise UserError(
            f"state {verb} needs exactly one of --state-dir DIR or --redis-url URL (or one of "
            "state.dir, redis.url in --config or the environment: NOVELD_STATE__DIR, "
            "NOVELD_REDIS__URL)"
        )


def _cmd_export(ns: argparse.Namespace) -> int:
    _resolve_target(ns)
    _need_one_target(ns, "export")
    out: Path = ns.output
    if out.is_symlink() or (out.exists() and not out.is_file()):
        # the file is written beside it and renamed over it: never over a device or a link
        raise UserError(f"{out} exists and is not a regular file; export to a file path")
    if out.exists() and not ns.force:
        raise UserError(f"{out} exists; pass --force to overwrite it")
    if not out.parent.is_dir():
        raise UserError(f"directory {out.parent} does not exist")
    if ns.redis_url:
        exported = _redis_store(ns).export()  # one transaction: consistent while writers run
        if exported is None:
            raise UserError(f"namespace {ns.namespace!r} has no state in Redis")
        state, outbox, uidnext = exported
    else:
        state, outbox, uidnext = _read_state_dir(ns.state_dir)
    write_snapshot(out, state, outbox, uidnext)
    info = summarize(state, len(outbox))
    print(
        f"exported {info['docs']} docs, {info['active_clusters']} active clusters to {out}",
        file=sys.stderr,
    )
    if ns.json:
        _print(info, True)
    return 0


def _cmd_import(ns: argparse.Namespace) -> int:
    from noveld.state.redis.reasons import StoreConflict

    _resolve_target(ns)
    _need_one_target(ns, "import")
    try:
        state, outbox, uidnext = read_export(ns.input)
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    if ns.redis_url:
        try:
            _redis_store(ns).import_state(state, outbox, uidnext)
        except StoreConflict as exc:
            raise UserError(str(exc)) from exc
        where = f"namespace {ns.namespace!r}"
    else:
        path = ns.state_dir / SNAPSHOT_NAME
        with _holding(ns.state_dir):
            if path.exists():
                raise UserError(
                    f"{ns.state_dir} already holds state; import into an empty directory"
                )
            write_snapshot(path, state, outbox, uidnext)
        where = str(ns.state_dir)
    print(f"imported {state.counters.get('docs', 0)} docs into {where}", file=sys.stderr)
    return 0


@contextmanager
def _holding(state_dir: Path) -> Iterator[None]:
    """Hold a state dir while a tool rewrites its snapshot; refused while a run holds it."""
    from noveld.daemon.startup import refuse_a_file_as_state_dir

    refuse_a_file_as_state_dir(state_dir)
    try:
        with hold_state_dir(state_dir):
            yield
    except StateDirBusy as exc:
        raise UserError(str(exc)) from exc


def _cmd_set_offset(ns: argparse.Namespace) -> int:
    _resolve_target(ns)
    _need_one_target(ns, "set-offset")
    if ns.offset < 0:
        raise UserError(f"the offset must be >= 0, got {ns.offset}")
    if ns.state_dir is not None:
        if not (ns.state_dir / SNAPSHOT_NAME).exists():
            raise UserError(f"no state snapshot in {ns.state_dir}")
        with _holding(ns.state_dir):
            old = _set_snapshot_offset(ns.state_dir, ns.partition, ns.offset)
        where, when = str(ns.state_dir), "The next run reads it from there."
    else:
        store = _redis_store(ns)
        if not store.has_state():
            raise UserError(f"namespace {ns.namespace!r} has no state in Redis")
        old = store.set_offset(ns.partition, ns.offset)
        if old is None:
            _no_such_partition(f"namespace {ns.namespace!r}", ns.partition, store.partitions())
        where = f"namespace {ns.namespace!r}"
        when = (
            "A Kafka daemon holding the partition reads it from there within seconds; a file "
            "or stdin run reading this input now stops (stop it first, then run it again)."
        )
    if ns.offset < old:
        effect = f"records {ns.offset}–{old - 1} will be read (again, if they were read before)"
    elif ns.offset > old:
        effect = f"records {old}–{ns.offset - 1} will not be read"
    else:
        effect = "unchanged"
    print(f"{ns.partition}: stored offset {old} → {ns.offset} in {where}; {effect}. {when}",
          file=sys.stderr)  # fmt: skip
    return 0


def _no_such_partition(where: str, partition: str, known: list[str]) -> NoReturn:
    raise UserError(
        f"{where} has no stored offset for {partition!r} (it has: {', '.join(known) or 'none'}); "
        "partitions are named topic:partition (a file is path:0)"
    )


def _set_snapshot_offset(state_dir: Path, partition: str, offset: int) -> int:
    """Replace one partition's offset in a state dir's snapshot (rewritten atomically); the old
    offset. The checksum kept of a file's lines up to the old offset goes with it."""
    state, outbox, uidnext = _read_state_dir(state_dir)
    old = state.offsets.get(partition)
    if old is None:
        _no_such_partition(str(state_dir), partition, sorted(state.offsets))
    if offset == old:
        return old
    state.offsets[partition] = offset
    inputs = state.novelty.get("inputs", {})
    inputs.pop(partition, None)
    if not inputs:
        state.novelty.pop("inputs", None)
    write_snapshot(state_dir / SNAPSHOT_NAME, state, outbox, uidnext)
    return old


def _read_state_dir(
    state_dir: Path,
) -> tuple[NamespaceState, list[dict[str, Any]], dict[str, int]]:
    """A state dir's snapshot as ``read_export`` gives it; a missing or damaged one refused."""
    path = state_dir / SNAPSHOT_NAME
    if not path.exists():
        raise UserError(f"no state snapshot in {state_dir}")
    try:
        return read_export(path)
    except ValueError as exc:
        raise UserError(str(exc)) from exc


def _print(info: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(info, indent=2))
        return
    for k, v in info.items():
        print(f"{k:>20}  {json.dumps(v) if isinstance(v, dict) else v}")


def _add_location(parser: Any, state_dir: str, redis: str) -> None:
    """The options that say where a namespace's state is: ``--state-dir`` or ``--redis-url``
    with ``--namespace``, and the ``--config`` they may come from."""
    parser.add_argument("--state-dir", type=Path, help=state_dir)
    parser.add_argument("--redis-url", help=f"{redis} (with --namespace)")
    parser.add_argument(
        "--namespace", help="namespace in Redis (default: NOVELD_NAMESPACE, --config, default)"
    )
    parser.add_argument("--config", type=Path, help="TOML config file (as the daemon's)")


def add_state_commands(sub: Any) -> None:
    """Register ``state show``, ``state export``, ``state import`` and ``state set-offset``."""
    st = sub.add_parser(
        "state", help="inspect, back up, restore and move a namespace's durable state"
    )
    st_sub = st.add_subparsers(dest="state_command", required=True, metavar="ACTION")
    show = st_sub.add_parser("show", help="summary of a namespace's state (counts, offsets, hash)")
    _add_location(show, "embedded state directory", "Redis holding the state")
    show.add_argument("--json", action="store_true", help="JSON output")
    show.set_defaults(func=_cmd_show)

    exp = st_sub.add_parser(
        "export",
        help="write a namespace's state to a file (versioned .npz, no pickle)",
        description="Write the statistics, vocabulary, novelty state, offsets, counters and "
        "undelivered events to OUTPUT. From Redis they are read in one transaction, so a "
        "namespace can be backed up while its daemons commit; the copy is the state as of "
        "one commit.",
    )
    exp.add_argument("output", type=Path, help="file to write (e.g. backup.npz)")
    _add_location(exp, "embedded state directory to read", "Redis holding the state")
    exp.add_argument("--force", action="store_true", help="overwrite OUTPUT if it exists")
    exp.add_argument("--json", action="store_true", help="print the exported state's summary")
    exp.set_defaults(func=_cmd_export)

    imp = st_sub.add_parser(
        "import",
        help="load an exported state into an empty namespace or state directory",
        description="Refuses a target that already holds state. Models started on the "
        "imported namespace must use the settings it was exported with (fingerprint).",
    )
    imp.add_argument("input", type=Path, help="file written by `noveld state export`")
    _add_location(imp, "empty embedded state directory to fill", "Redis to write to")
    imp.set_defaults(func=_cmd_import)

    so = st_sub.add_parser(
        "set-offset",
        help="set an input's stored offset (a Kafka partition the daemon holds, a rotated file)",
        description="Replace the next offset stored with the state for one input partition. "
        "For a Kafka partition the daemon holds because its stored offset is past the log end "
        "(/readyz and the log name it): 0 for a topic deleted and re-created, the log end "
        "when the broker lost records. For a partition that is not held, stop the daemons "
        "first: a daemon reading it finds its offset moved under it, and stops (exit 6) when "
        "it was moved back, or pauses to reload when it was moved forward. For a file input "
        "(partition PATH:0, offset = lines) that was rotated or replaced, which a run refuses "
        "to resume: 0 reads the new file from its start into the same model. A state dir is "
        "refused while a run holds it.",
    )
    so.add_argument(
        "partition",
        help="topic:partition, as `state show` lists the offsets (stdin's, -:0, after a --: "
        "`noveld state set-offset --state-dir DIR -- -:0 0`)",
    )
    so.add_argument("offset", type=int, help="the next offset to read")
    _add_location(so, "embedded state directory", "Redis holding the state")
    so.set_defaults(func=_cmd_set_offset)
