"""`noveld stories` after real runs: the story summaries kept by the embedded store and by
Redis (folded by its commit script) agree with each other and with the run's own assignment
events; they survive SIGKILL and resume, export and import; --no-exemplar-text keeps no text;
bad targets give one-line errors."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from cli_runner import NOVELD, noveld

pytestmark = pytest.mark.integration

DOCS = 3000
BATCH = ("--batch-size", "64")  # many batches: a kill lands mid-stream


@pytest.fixture(scope="module")
def stream(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "stream.jsonl"
    out = noveld(
        "generate", "--docs", str(DOCS), "--stories", "12", "--stream-seed", "5", "--out", str(path)
    )
    assert out.returncode == 0, out.stderr
    return path


@pytest.fixture(scope="module")
def clean(stream: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A clean embedded run with assignment events: its state dir and its events."""
    st = tmp_path_factory.mktemp("clean") / "st"
    out = noveld("run", "--input", str(stream), "--state-dir", str(st), "--emit-assignments",
                 "--quiet", *BATCH)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return st, out.stdout


def stories(*target: str, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    out = noveld("stories", *target, "--json", "--limit", "100000", *extra, timeout=120)
    assert out.returncode == 0, out.stderr
    view: dict[str, Any] = json.loads(out.stdout)
    return view


def by_uid(view: dict[str, Any], terms: bool = True) -> dict[int, dict[str, Any]]:
    """Rows by uid (without top terms when ``terms`` is False: their lazy schedule is the
    process's, so a resumed run may have computed them at other sizes)."""
    return {
        r["uid"]: {k: v for k, v in r.items() if terms or k != "top_terms"} for r in view["stories"]
    }


def oracle(events: str, texts: dict[str, str]) -> dict[str, tuple[int, list[list[Any]]]]:
    """Per cluster id: documents assigned and the first three as exemplars, replayed from the
    run's events (a merge folds the merged cluster's into its survivor's)."""
    docs: dict[str, int] = {}
    ex: dict[str, list[list[Any]]] = {}
    for line in events.splitlines():
        e = json.loads(line)
        if e["type"] == "document.assigned":
            c = e["cluster_id"]
            docs[c] = docs.get(c, 0) + 1
            if len(ex.setdefault(c, [])) < 3:
                ex[c].append([e["doc_id"], texts[e["doc_id"]][:200]])
        elif e["type"] == "cluster.merged":
            gone = e["cluster_id"]
            docs[e["into"]] = docs.get(e["into"], 0) + docs.pop(gone, 0)
            ex[e["into"]] = (ex.get(e["into"], []) + ex.pop(gone, []))[:3]
    return {c: (docs[c], ex[c]) for c in docs}


def test_stories_list_the_live_clusters_as_the_events_made_them(
    stream: Path, clean: tuple[Path, str]
) -> None:
    st, events = clean
    view = stories("--state-dir", str(st))
    show = json.loads(noveld("state", "show", "--state-dir", str(st), "--json").stdout)
    assert view["total"] == show["active_clusters"] == len(view["stories"])
    assert sum(r["size"] for r in view["stories"]) == pytest.approx(show["mass"])
    texts = {d["id"]: d["text"] for d in map(json.loads, stream.read_text().splitlines())}
    expected = oracle(events, texts)
    for r in view["stories"]:
        docs, exemplars = expected[r["cluster_id"]]
        assert r["docs"] == docs
        assert [[e["doc_id"], e["text"]] for e in r["exemplars"]] == exemplars
        assert sum(r["growth"]) <= r["docs"]
    recents = [r["recent"] for r in view["stories"]]
    assert recents == sorted(recents, reverse=True)  # sorted by growth
    assert view["now"].startswith("2023-11-1")  # the stream's own event time (ts)
    # the text listing: the biggest story's uid and an exemplar's text
    top = max(view["stories"], key=lambda r: r["size"])
    assert top["top_terms"] and top["growth"][-1] > 0
    text = noveld("stories", "--state-dir", str(st), "--sort", "size", "--limit", "1")
    assert text.returncode == 0, text.stderr
    assert f"c{top['uid']}" in text.stdout and top["exemplars"][0]["text"][:40] in text.stdout
    # which story is a document in: an exemplar's is known, another's is explained
    doc = top["exemplars"][0]["doc_id"]
    found = json.loads(noveld("stories", "--state-dir", str(st), "--doc", doc, "--json").stdout)
    assert found["story"]["uid"] == top["uid"]
    unknown = noveld("stories", "--state-dir", str(st), "--doc", "no-such-doc")
    assert unknown.returncode == 0 and "--emit-assignments" in unknown.stdout


def test_redis_keeps_the_same_stories_and_export_import_carries_them(
    stream: Path, clean: tuple[Path, str], redis_url: str, tmp_path: Path
) -> None:
    target = ("--redis-url", redis_url, "--namespace", "stories-a")
    out = noveld("run", "--input", str(stream), *target, "--quiet", *BATCH,
                 "--dlq", str(tmp_path / "dlq.jsonl"))  # fmt: skip
    assert out.returncode == 0, out.stderr
    # top terms are computed within a time budget: compared apart
    embedded = by_uid(stories("--state-dir", str(clean[0])), terms=False)
    in_redis = stories(*target)
    assert by_uid(in_redis, terms=False) == embedded  # the commit script folds as the oracle
    assert max(in_redis["stories"], key=lambda r: r["size"])["top_terms"]
    backup = tmp_path / "b.npz"
    assert noveld("state", "export", str(backup), *target).returncode == 0
    moved = ("--redis-url", redis_url, "--namespace", "stories-b")
    assert noveld("state", "import", str(backup), *moved).returncode == 0
    assert by_uid(stories(*moved)) == by_uid(in_redis)
    st = tmp_path / "imported"
    assert noveld("state", "import", str(backup), "--state-dir", str(st)).returncode == 0
    assert by_uid(stories("--state-dir", str(st))) == by_uid(in_redis)


def test_sigkill_and_resume_keep_the_summaries_of_a_clean_run(
    stream: Path, clean: tuple[Path, str], tmp_path: Path
) -> None:
    st = tmp_path / "st"
    args = ["run", "--input", str(stream), "--state-dir", str(st), "--quiet",
            "--snapshot-interval", "0", *BATCH]  # fmt: skip
    proc = subprocess.Popen([*NOVELD, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not (st / "state.npz").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    partial = stories("--state-dir", str(st))
    shown = json.loads(noveld("state", "show", "--state-dir", str(st), "--json").stdout)
    assert shown["docs"] < DOCS  # killed mid-stream
    assert sum(r["docs"] for r in partial["stories"]) <= shown["docs"]
    out = noveld(*args)
    assert out.returncode == 0, out.stderr
    assert by_uid(stories("--state-dir", str(st)), terms=False) == by_uid(
        stories("--state-dir", str(clean[0])), terms=False
    )


def test_no_exemplar_text_keeps_no_document_text(stream: Path, tmp_path: Path) -> None:
    st = tmp_path / "st"
    out = noveld("run", "--input", str(stream), "--state-dir", str(st), "--quiet",
                 "--no-exemplar-text")  # fmt: skip
    assert out.returncode == 0, out.stderr
    view = stories("--state-dir", str(st))
    assert view["stories"] and all(
        e["text"] is None and e["doc_id"] for r in view["stories"] for e in r["exemplars"]
    )
    first = json.loads(stream.read_text().splitlines()[0])["text"]
    assert first.encode() not in (st / "state.npz").read_bytes()


def test_bad_targets_are_one_line_errors(tmp_path: Path, redis_url: str) -> None:
    cases = [
        (("--state-dir", str(tmp_path / "none")), "does not exist"),
        (("--state-dir", str(tmp_path)), "no state snapshot"),
        (("--redis-url", redis_url, "--namespace", "never-written"), "has no state in Redis"),
        (("--redis-url", "redis://127.0.0.1:1", "--namespace", "x"), "cannot reach Redis"),
        (("--state-dir", str(tmp_path), "--redis-url", redis_url), "exactly one of"),
        (("--state-dir", str(tmp_path), "--limit", "0"), "--limit"),
    ]
    for target, message in cases:
        out = noveld("stories", *target, timeout=60)
        assert out.returncode != 0 and message in out.stderr, (target, out.stderr)
        assert "Traceback" not in out.stderr
