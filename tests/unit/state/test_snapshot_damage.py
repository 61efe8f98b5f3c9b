"""A damaged or foreign-but-well-formed ``state.npz`` is refused when read, with one line naming
the snapshot and the field — never a traceback, a segfault in a numba kernel (``stats.pk`` or
``stats.nxt`` out of range) or an endless walk (``stats.nxt`` looping) — by ``run``, ``state
show`` and ``state import`` alike; and every snapshot noveld writes (each model and likelihood,
known labels, a compacted vocabulary, an empty stream) is accepted."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cli_runner import noveld
from streams import fading_stories

from noveld.state.memory import SNAPSHOT_NAME, SnapshotError, read_export, read_snapshot
from noveld.synth import SynthConfig, write_jsonl

Arrays = dict[str, np.ndarray]
Edit = Callable[[dict[str, Any], Arrays], Any]

#: a stuck subprocess (an endless loop in a kernel) fails the test instead of hanging it
TIMEOUT = 120


def run_to_snapshot(state_dir: Path, docs: Path, *options: str) -> Path:
    out = noveld("run", "--input", str(docs), "--state-dir", str(state_dir), "-q", *options)
    assert out.returncode == 0, out.stderr
    return state_dir / SNAPSHOT_NAME


@pytest.fixture(scope="module")
def stream(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "in.jsonl"
    write_jsonl(SynthConfig(n_docs=400, n_stories=8, birth_rate=0.03, seed=3), path)
    return path


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory, stream: Path) -> Path:
    """A real snapshot of a run over ``stream``."""
    return run_to_snapshot(tmp_path_factory.mktemp("base"), stream)


def load(path: Path) -> tuple[dict[str, Any], Arrays]:
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    return json.loads(bytes(arrays.pop("meta")).decode()), arrays


def save(path: Path, meta: Any, arrays: Arrays) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    with open(path, "wb") as fh:
        np.savez(fh, meta=raw, **arrays)


def damaged(src: Path, dst: Path, edit: Edit) -> Path:
    """``src`` with ``edit`` applied to its header and arrays (an edit may return a new
    header: one that is not an object)."""
    meta, arrays = load(src)
    replaced = edit(meta, arrays)
    save(dst, meta if replaced is None else replaced, arrays)
    return dst


# ---- edits ------------------------------------------------------------------------------------
def put(key: str, value: Any) -> Edit:
    def edit(meta: dict[str, Any], arrays: Arrays) -> None:
        meta[key] = value

    return edit


def drop(key: str) -> Edit:
    def edit(meta: dict[str, Any], arrays: Arrays) -> None:
        del meta[key]

    return edit


def array(name: str, change: Callable[[np.ndarray], np.ndarray]) -> Edit:
    def edit(meta: dict[str, Any], arrays: Arrays) -> None:
        arrays[name] = change(arrays[name].copy())

    return edit


def at(index: int, value: Any) -> Callable[[np.ndarray], np.ndarray]:
    def change(a: np.ndarray) -> np.ndarray:
        a[index] = value
        return a

    return change


def unlink_array(name: str) -> Edit:
    def edit(meta: dict[str, Any], arrays: Arrays) -> None:
        del arrays[name]

    return edit


def short_vocab(meta: dict[str, Any], arrays: Arrays) -> None:
    meta["vocab"] = meta["vocab"][:3]
    meta["novelty"]["candidates"] = []


def duplicate_word(meta: dict[str, Any], arrays: Arrays) -> None:
    meta["vocab"].append(meta["vocab"][0])


def offsets_as_text(meta: dict[str, Any], arrays: Arrays) -> None:
    meta["offsets"] = {k: "abc" for k in meta["offsets"]}


def bad_candidate(meta: dict[str, Any], arrays: Arrays) -> None:
    meta["novelty"]["candidates"] = [{"uid": "x"}]


def bad_member_word(meta: dict[str, Any], arrays: Arrays) -> None:
    member = {"doc_id": "d", "at": {}, "index": 0, "words": [10**6], "counts": [1]}
    cand = {"uid": 1, "founding_doc_id": "d", "born_at": {}, "born_index": 0}
    meta["novelty"]["candidates"] = [{**cand, "novelty_score": 1.0, "members": [member]}]


def uid_counter_behind(meta: dict[str, Any], arrays: Arrays) -> None:
    meta["uidnext"] = {"0": 0}


def first_list(arrays: Arrays) -> int:
    """A word whose postings list has two entries or more."""
    head, nxt = arrays["stats.head"], arrays["stats.nxt"]
    return next(w for w in range(head.shape[0]) if head[w] >= 0 and nxt[head[w]] >= 0)


def list_loops_back(meta: dict[str, Any], arrays: Arrays) -> None:
    """The last entry of a word's list points back to its first: walks never end."""
    head, nxt = arrays["stats.head"], arrays["stats.nxt"]
    w = first_list(arrays)
    e = int(head[w])
    while nxt[e] >= 0:
        e = int(nxt[e])
    nxt[e] = head[w]


def detached_cycle(meta: dict[str, Any], arrays: Arrays) -> None:
    """A list turned into a ring no head points to: every entry still linked from one place."""
    w = first_list(arrays)
    list_loops_back(meta, arrays)
    arrays["stats.head"][w] = -1


def live_slot_freed(meta: dict[str, Any], arrays: Arrays) -> None:
    live = int(np.flatnonzero(arrays["stats.alive"])[0])
    arrays["stats.free_stack"] = np.append(arrays["stats.free_stack"], live)
    arrays["stats.ictl"][2] += 1


def duplicate_uid(meta: dict[str, Any], arrays: Arrays) -> None:
    live = np.flatnonzero(arrays["stats.alive"])
    arrays["stats.uid"][live[1]] = arrays["stats.uid"][live[0]]


def more_slots(meta: dict[str, Any], arrays: Arrays) -> None:
    arrays["stats.ictl"][1] += 10**6  # kmax: the kernels would scan a million slots


#: (id, edit, what the message must name)
CASES: list[tuple[str, Edit, str]] = [
    ("header-not-object", lambda meta, arrays: [1, 2], "meta"),
    ("format-text", put("format", "1"), "format"),
    ("format-unknown", put("format", 3), "format"),
    ("format-bool", put("format", True), "format"),
    ("fingerprint-missing", drop("fingerprint"), "fingerprint"),
    ("fingerprint-text", put("fingerprint", "x"), "fingerprint"),
    ("novelty-missing", drop("novelty"), "novelty"),
    ("novelty-list", put("novelty", [1]), "novelty"),
    ("novelty-unknown", put("novelty", {"foo": 1}), "novelty"),
    ("novelty-candidate", bad_candidate, "novelty.candidates[0]"),
    ("novelty-member-word", bad_member_word, "novelty.candidates[0].members[0].words"),
    ("novelty-dropped", put("novelty", {"candidates": [], "dropped": "2"}), "novelty.dropped"),
    ("offsets-list", put("offsets", [1, 2]), "offsets"),
    ("offsets-text", offsets_as_text, "offsets"),
    ("offsets-negative", put("offsets", {"in.jsonl:0": -5}), "offsets"),
    ("counters-text", put("counters", {"docs": "x"}), "counters"),
    ("counters-emptied", put("counters", {}), "counters"),
    ("vocab-int", put("vocab", [1, 2, 3]), "vocab"),
    ("vocab-duplicate", duplicate_word, "vocab"),
    ("vocab-short", short_vocab, "vocab"),
    ("vocab-checked", put("vocab_checked", -1), "vocab_checked"),
    ("outbox-text", put("outbox", "abc"), "outbox"),
    ("outbox-entry", put("outbox", [{"x": 1}]), "outbox[0]"),
    ("uidnext-text", put("uidnext", {"0": "x"}), "uidnext"),
    ("uidnext-behind", uid_counter_behind, "uidnext"),
    ("uidnext-slot", put("uidnext", {"abc": 1}), "uidnext"),
    ("gone-unsorted", array("vocab_gone", lambda a: np.array([5, 3], np.uint64)), "vocab_gone"),
    ("m-missing", unlink_array("stats.m"), "stats.m"),
    ("m-short", array("stats.m", lambda a: a[:1]), "stats.m"),
    ("m-2d", array("stats.m", lambda a: a.reshape(1, -1)), "stats.m"),
    ("m-nan", array("stats.m", lambda a: a * np.nan), "stats.m"),
    ("m-negative", array("stats.m", at(0, -5.0)), "stats.m"),
    ("ntok-inf", array("stats.ntok", at(0, np.inf)), "stats.ntok"),
    ("pc-nan", array("stats.pc", at(0, np.nan)), "stats.pc"),
    ("alive-int", array("stats.alive", lambda a: a.astype(np.int64)), "stats.alive"),
    ("pk-big", array("stats.pk", lambda a: a + 10**9), "stats.pk"),
    ("pk-negative", array("stats.pk", at(0, -1)), "stats.pk"),
    ("head-short", array("stats.head", lambda a: a[:1]), "stats.head"),
    ("head-outside", array("stats.head", at(0, 10**9)), "stats.head"),
    ("head-huge-unsigned", array("stats.head", lambda a: a.astype(np.uint64)), "stats.head"),
    ("nxt-garbage", array("stats.nxt", lambda a: np.full_like(a, 10**9)), "stats.nxt"),
    ("nxt-all-zero", array("stats.nxt", np.zeros_like), "stats.nxt"),
    ("nxt-loops-back", list_loops_back, "stats.nxt"),
    ("nxt-detached-cycle", detached_cycle, "stats.nxt"),
    ("pool-short", array("stats.nxt", lambda a: a[:-1]), "stats.nxt"),
    ("scale-empty", array("stats.scale", lambda a: np.zeros(0)), "stats.scale"),
    ("scale-zero", array("stats.scale", lambda a: np.zeros(1)), "stats.scale"),
    ("ictl-text", array("stats.ictl", lambda a: np.array(["a"])), "stats.ictl"),
    ("ictl-short", array("stats.ictl", lambda a: a[:3]), "stats.ictl"),
    ("ictl-negative", array("stats.ictl", at(2, -1)), "stats.ictl"),
    ("ictl-pool-used", array("stats.ictl", at(0, 10**9)), "stats.ictl (pool_used)"),
    ("ictl-kmax", more_slots, "kmax"),
    ("uid-negative", array("stats.uid", lambda a: np.full_like(a, -7)), "stats.uid"),
    ("uid-duplicate", duplicate_uid, "stats.uid"),
    ("free-stack-live", live_slot_freed, "stats.free_stack"),
]


@pytest.mark.parametrize(("edit", "field"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_damaged_field_is_refused_naming_the_snapshot_and_the_field(
    base: Path, tmp_path: Path, edit: Edit, field: str
) -> None:
    path = damaged(base, tmp_path / SNAPSHOT_NAME, edit)
    with pytest.raises(SnapshotError) as caught:
        read_snapshot(path)
    message = str(caught.value)
    assert str(path) in message and field in message, message
    assert "\n" not in message
    with pytest.raises(SnapshotError):
        read_export(path)  # the reader of `state export` and `state import`


def test_the_undamaged_snapshot_reads_back(base: Path, tmp_path: Path) -> None:
    """The edits' round trip through load/save changes nothing by itself."""
    path = damaged(base, tmp_path / SNAPSHOT_NAME, lambda meta, arrays: None)
    state, outbox = read_snapshot(path)
    assert state.counters["docs"] == 400 and outbox == []


def one_line_error(out: Any) -> str:
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("noveld: error: "), out.stderr
    return str(lines[0])


#: the cases that crashed (segfault, endless loop) or printed a traceback before
CLI_CASES = ["pk-big", "nxt-garbage", "nxt-all-zero", "fingerprint-text", "offsets-text"]


@pytest.mark.parametrize("case", CLI_CASES)
def test_run_and_state_show_stop_with_one_line(
    base: Path, stream: Path, tmp_path: Path, case: str
) -> None:
    edit, field = next(c[1:] for c in CASES if c[0] == case)
    state_dir = tmp_path / "state"
    damaged(base, state_dir / SNAPSHOT_NAME, edit)
    before = (state_dir / SNAPSHOT_NAME).read_bytes()
    args = ("--input", str(stream), "--state-dir", str(state_dir))
    line = one_line_error(noveld("run", *args, timeout=TIMEOUT))
    assert field in line and SNAPSHOT_NAME in line
    assert (state_dir / SNAPSHOT_NAME).read_bytes() == before  # left as it was found
    line = one_line_error(noveld("state", "show", "--state-dir", str(state_dir), timeout=TIMEOUT))
    assert field in line
    export = tmp_path / "copy.npz"
    line = one_line_error(
        noveld("state", "export", str(export), "--state-dir", str(state_dir), timeout=TIMEOUT)
    )
    assert field in line and not export.exists()


@pytest.mark.parametrize("case", ["outbox-text", "fingerprint-text", "nxt-all-zero"])
def test_state_import_refuses_a_damaged_file(base: Path, tmp_path: Path, case: str) -> None:
    edit, field = next(c[1:] for c in CASES if c[0] == case)
    backup = damaged(base, tmp_path / "backup.npz", edit)
    target = tmp_path / "imported"
    line = one_line_error(
        noveld("state", "import", str(backup), "--state-dir", str(target), timeout=TIMEOUT)
    )
    assert field in line and str(backup) in line
    assert not (target / SNAPSHOT_NAME).exists()


# ---- what noveld writes is accepted ----------------------------------------------------------
def jsonl(path: Path, docs: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path


VMF = ["--likelihood", "vmf", "--embedding-dim", "8"]
COMPACTING = ["--half-life", "50", "--compact-vocabulary-at", "100", "--batch-size", "50"]
KINDS: dict[str, tuple[str, list[str]]] = {
    "dpmm": ("plain", []),
    "svi": ("plain", ["--model", "svi"]),
    "hdp": ("sources", ["--model", "hdp"]),
    "edcm": ("bursty", ["--likelihood", "edcm"]),
    "vmf": ("embedded", VMF),
    "known-labels": ("plain", ["--use-labels"]),
    "forgetting": ("plain", ["--half-life", "50", "--batch-size", "50"]),
    "compacted": ("fading", COMPACTING),
    "compacted-edcm": ("fading-long", [*COMPACTING, "--likelihood", "edcm"]),
    "compacted-hdp": ("fading-long", [*COMPACTING, "--model", "hdp", "--topics", "64"]),
    "compacted-vmf": ("fading-embedded", [*COMPACTING, *VMF, "--vmf-cosine", "0.9"]),
    "empty": ("empty", []),
}


def make_stream(kind: str, path: Path) -> Path:
    if kind == "empty":
        path.write_text("")
    elif kind == "fading":
        jsonl(path, fading_stories(1500))
    elif kind == "fading-long":  # reserved words (hdp topics, edcm bins) stay: more to fade
        jsonl(path, fading_stories(3000))
    elif kind == "fading-embedded":
        jsonl(path, fading_stories(1500, embedding_dim=8))
    else:
        extra = {
            "plain": {},
            "sources": {"n_sources": 3},
            "bursty": {"burstiness": 5.0, "doc_len_mean": 30.0},
            "embedded": {"embedding_dim": 8},
        }[kind]
        write_jsonl(SynthConfig(n_docs=600, n_stories=10, birth_rate=0.03, **extra), path)
    return path


@pytest.mark.parametrize(("stream_kind", "options"), KINDS.values(), ids=list(KINDS))
def test_every_snapshot_noveld_writes_is_accepted(
    tmp_path: Path, stream_kind: str, options: list[str]
) -> None:
    docs = make_stream(stream_kind, tmp_path / "in.jsonl")
    path = run_to_snapshot(tmp_path / "state", docs, *options)
    state, _ = read_snapshot(path)
    meta, _ = load(path)
    if stream_kind.startswith("fading"):
        assert meta["format"] == 2 and state.vocab_gone.shape[0] > 0  # compacted: format 2
    # what `state export` writes (with the uid counters) reads back too, and resumes
    export = tmp_path / "export.npz"
    out = noveld("state", "export", str(export), "--state-dir", str(path.parent), timeout=TIMEOUT)
    assert out.returncode == 0, out.stderr
    read_export(export)
    shutil.rmtree(path.parent)
    out = noveld("state", "import", str(export), "--state-dir", str(path.parent), timeout=TIMEOUT)
    assert out.returncode == 0, out.stderr
    again = noveld("run", "--input", str(docs), "--state-dir", str(path.parent), "-q", *options)
    assert again.returncode == 0, again.stderr


def test_a_fitted_snapshot_is_accepted(stream: Path, tmp_path: Path) -> None:
    """``noveld fit`` writes its snapshot from statistics built anew (not by a run)."""
    out = noveld("fit", str(stream), "--state-dir", str(tmp_path), "--sweeps", "2", "-q")
    assert out.returncode == 0, out.stderr
    read_snapshot(tmp_path / SNAPSHOT_NAME)
