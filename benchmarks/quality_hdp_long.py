"""The ``hdp`` model's clustering of long and short documents, per stream and seed (issue #31).

    python benchmarks/quality_hdp_long.py --data FILE [FILE ...] [--seeds 0 1 2]
                                          [--set model.KEY=VALUE ...] [--per-label]

Runs ``noveld evaluate`` (the real pipeline, defaults plus ``--model hdp`` and any ``--set``
overrides) over each labelled file with each model seed and prints one line per run: NMI,
homogeneity, completeness, clusters, seconds; and the median NMI per file. ``--per-label``
adds, for each label, its documents, the share in its largest cluster and that cluster's
purity (the share of the cluster holding that label): a label split across clusters has a low
share, labels merged into one cluster a low purity.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine

from noveld.daemon.evaluate import StreamRecorder, evaluate_file
from noveld.daemon.settings import load_settings


def parse_value(text: str) -> Any:
    """A ``--set`` value as JSON when it parses (numbers, booleans), else the string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def overrides(pairs: list[str], seed: int) -> dict[str, Any]:
    """Nested settings overrides from ``section.key=value`` pairs, the model kind and seed."""
    out: dict[str, Any] = {"model": {"kind": "hdp", "seed": seed}}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or "." not in key:
            raise SystemExit(f"--set wants section.key=value, got {pair!r}")
        section, name = key.split(".", 1)
        out.setdefault(section, {})[name] = parse_value(value)
    return out


def per_label(rec: StreamRecorder) -> list[tuple[str, int, float, float]]:
    """(label, documents, share in its largest cluster, that cluster's purity) per label."""
    pairs = [(str(lab), c) for lab, c in zip(rec.labels, rec.clusters, strict=True) if lab]
    by_cluster = Counter(c for _, c in pairs)
    out = []
    for label, n in sorted(Counter(lab for lab, _ in pairs).items(), key=lambda x: -x[1]):
        cl, top = Counter(c for lab, c in pairs if lab == label).most_common(1)[0]
        out.append((label, n, top / n, top / by_cluster[cl]))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--data", nargs="+", required=True, help="labelled JSONL files")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--set", dest="pairs", nargs="*", default=[], metavar="SECTION.KEY=VALUE")
    p.add_argument("--per-label", action="store_true", help="break each run down by label")
    a = p.parse_args()
    print(f"machine: {machine()}")
    print(f"settings: --model hdp {' '.join(a.pairs) or '(defaults)'}")
    for path in a.data:
        nmis = []
        for seed in a.seeds:
            recs: list[StreamRecorder] = []
            settings = load_settings(None, overrides(a.pairs, seed))
            r = evaluate_file(settings, path, on_done=recs.append)
            nmis.append(r["nmi"])
            print(
                f"{Path(path).name:>22} seed {seed}: NMI {r['nmi']:.4f}  homogeneity "
                f"{r['homogeneity']:.3f}  completeness {r['completeness']:.3f}  clusters "
                f"{r['clusters']:>5}  {r['seconds']:.1f} s",
                flush=True,
            )
            if a.per_label:
                for label, n, share, purity in per_label(recs[0]):
                    print(
                        f"    {label:>16} {n:>6}  in largest {share:.2f}  its purity {purity:.2f}"
                    )
        print(f"{Path(path).name:>22} median NMI {statistics.median(nmis):.4f}", flush=True)


if __name__ == "__main__":
    main()
