"""What a warm start buys the live stream: cold, warm by `noveld run` over the archive, and warm
by `noveld fit` (the pass, then Gibbs sweeps over the whole archive).

    python benchmarks/warm_start.py [--data FILE] [--split 0.5] [--sweeps 5]

The file is cut at ``--split``: the first part is the archive, the rest the live stream. For each
start the live stream runs through `noveld run`'s pipeline on that state and is scored on its own
documents: NMI of the committed labels, and novelty against the stories *new in the live part*
(a birth is right when its founding document is among the first 5 of such a story; a birth of a
story the archive already had is a false alarm). The archive's own NMI is printed for `run` and
`fit` (the clusters the live stream starts from).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import add_data_option, load_texts, machine

from noveld.daemon.cli_fit import fit_archive
from noveld.daemon.embedded import run_file
from noveld.daemon.evaluate import StreamRecorder
from noveld.daemon.settings import load_settings
from noveld.daemon.sinks import CollectingEvents
from noveld.eval.metrics import clustering_scores

WINDOW = 5


def live_scores(rec: StreamRecorder, events: list[dict[str, Any]], old: set[str]) -> dict[str, Any]:
    """NMI on the live documents; novelty against the stories the archive did not have."""
    labels = [str(lab) for lab in rec.labels]
    rank: dict[str, int] = {}
    first_of: dict[int, int] = {}  # offset → rank of the document within its story (live part)
    for off, lab in zip(rec.offsets, labels, strict=True):
        first_of[off] = rank.get(lab, 0)
        rank[lab] = rank.get(lab, 0) + 1
    label_at = dict(zip(rec.offsets, labels, strict=True))
    offset_of_id = dict(zip(rec.ids, rec.offsets, strict=True))
    new_stories = {lab for lab in labels if lab not in old}
    found: set[str] = set()
    births = right = stale = 0
    for ev in events:
        if ev.get("type") != "cluster.born":
            continue
        births += 1
        off = offset_of_id.get(ev["founding_doc_id"])
        if off is None:
            continue
        lab = label_at[off]
        if lab in old:
            stale += 1
        elif first_of[off] < WINDOW:
            right += 1
            found.add(lab)
    return {
        "nmi": round(clustering_scores(labels, rec.clusters)["nmi"], 4),
        "births": births,
        "precision": round(right / births, 3) if births else 0.0,
        "recall": round(len(found) / len(new_stories), 3) if new_stories else 0.0,
        "births_of_archive_stories": stale,
        "new_stories": len(new_stories),
    }


def run_live(state_dir: Path | None, live: Path, old: set[str]) -> dict[str, Any]:
    """The live part on a state (None: cold), scored."""
    over: dict[str, Any] = {"dlq": str(live.with_suffix(".dlq"))}
    if state_dir is not None:
        over["state"] = {"dir": str(state_dir)}
    settings = load_settings(None, over)
    rec, sink = StreamRecorder(), CollectingEvents()
    code, _, _ = run_file(settings, str(live), events_sink=sink, observer=rec)
    assert code == 0, code
    return live_scores(rec, sink.events, old)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    add_data_option(p)
    p.add_argument("--split", type=float, default=0.5, help="fraction of the file in the archive")
    p.add_argument("--sweeps", type=int, default=5)
    a = p.parse_args()
    rows = load_texts(a.data)
    cut = int(len(rows) * a.split)
    old = {str(r["label"]) for r in rows[:cut]}
    print(f"machine: {machine()}")
    print(f"{a.data.name}: archive {cut:,} documents, live {len(rows) - cut:,}")
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        archive, live = t / "archive.jsonl", t / "live.jsonl"
        archive.write_text("".join(json.dumps(r) + "\n" for r in rows[:cut]))
        live.write_text("".join(json.dumps(r) + "\n" for r in rows[cut:]))
        results = {"cold": run_live(None, live, old)}
        warm = t / "warm"
        settings = load_settings(None, {"state": {"dir": str(warm)}, "dlq": str(t / "a.dlq")})
        rec = StreamRecorder()
        run_file(settings, str(archive), events_sink=CollectingEvents(), observer=rec)
        archive_nmi = clustering_scores([str(x) for x in rec.labels], rec.clusters)["nmi"]
        results["warm: run"] = {"archive_nmi": round(archive_nmi, 4), **run_live(warm, live, old)}
        fitted = t / "fitted"
        settings = load_settings(None, {"state": {"dir": str(fitted)}, "dlq": str(t / "f.dlq")})
        report = fit_archive(settings, str(archive), a.sweeps, None)
        results[f"warm: fit ({a.sweeps} sweeps)"] = {
            "archive_nmi": report["nmi"],
            **run_live(fitted, live, old),
        }
    for name, r in results.items():
        print(f"{name:>22}: " + ", ".join(f"{k} {v}" for k, v in r.items()))


if __name__ == "__main__":
    main()
