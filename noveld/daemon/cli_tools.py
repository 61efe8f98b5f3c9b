"""``noveld evaluate``, ``noveld generate`` and ``noveld demo``."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from noveld.daemon.errors import UserError
from noveld.daemon.exits import EXIT_INTERRUPTED
from noveld.daemon.settings import Settings
from noveld.synth import SynthConfig

_REPORT_ORDER = [
    "nmi",
    "ari",
    "homogeneity",
    "completeness",
    "v_measure",
    "purity",
    "clusters",
    "docs",
    "seconds",
    "docs_per_second",
    "novelty_precision",
    "novelty_recall",
    "novelty_latency_docs",
]


DEMO_EMBEDDING_DIM = 16
"""Embedding dimension of ``noveld demo --likelihood vmf`` unless ``--embedding-dim`` is given."""

_COUNTS = {"births", "true_clusters"}
"""Report keys that are counts although novelty scoring returns them as floats."""


def _as_count(key: str, value: Any) -> Any:
    """A count as an int (novelty scoring returns some counts as floats)."""
    if key in _COUNTS and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _print_report(report: dict[str, Any], as_json: bool) -> None:
    report = {k: _as_count(k, v) for k, v in report.items()}
    if as_json:
        strict = {k: (None if isinstance(v, float) and v != v else v) for k, v in report.items()}
        print(json.dumps(strict, indent=2, sort_keys=True, allow_nan=False))
        return
    keys = [k for k in _REPORT_ORDER if k in report] + sorted(
        k for k in report if k not in _REPORT_ORDER
    )
    for k in keys:
        v = report[k]
        print(f"{k:>22}  {v:.4f}" if isinstance(v, float) else f"{k:>22}  {v}")


def _evaluate(
    ns: argparse.Namespace, settings: Settings, path: str, progress: IO[str] | None
) -> dict[str, Any]:
    """The report of ``noveld evaluate``: plain, or under the known-labels protocol."""
    from noveld.daemon.evaluate import evaluate_file, evaluate_known

    if ns.known_fraction is not None:
        if path == "-" or not 0.0 <= ns.known_fraction <= 1.0:
            raise UserError("--known-fraction needs a file and a fraction in [0, 1]")
        return evaluate_known(settings, path, ns.known_fraction, ns.known_seed, ns.window, progress)
    # the file's labels are the truth being scored against: the model must not see them
    blind = settings.model.model_copy(update={"use_labels": False})
    settings = settings.model_copy(update={"model": blind})
    return evaluate_file(settings, path, window=ns.window, progress_out=progress)


def _cmd_evaluate(
    ns: argparse.Namespace, settings_of: Callable[[argparse.Namespace], Settings]
) -> int:
    from noveld.daemon.evaluate import RunStopped

    settings = settings_of(ns)
    path = str(ns.input)
    if path != "-" and not Path(path).is_file():
        raise UserError(f"input file {path} does not exist")
    if ns.window < 1:
        raise UserError(f"--window must be at least 1, got {ns.window}")
    progress = None if ns.json else sys.stderr
    with tempfile.TemporaryDirectory() as tmp:
        settings = settings.model_copy(update={"dlq": Path(tmp) / "dlq.jsonl"})
        try:
            report = _evaluate(ns, settings, path, progress)
        except RunStopped as exc:  # with progress on, the run has said why
            said = progress is not None and exc.code != EXIT_INTERRUPTED
            why = f"the run stopped before the end of {path}; nothing is scored" if said else exc
            sys.stderr.write(f"noveld evaluate: {why}\n")
            return exc.code

    if not report.get("docs", 0):  # an empty file, or nothing in it valid: nothing scored
        bad = report.get("invalid_records", 0)
        raise UserError(
            f"no valid document in {path} to score"
            + (f" ({bad:,} invalid records; noveld run writes them to a DLQ with the reason)"
               if bad else "")
        )  # fmt: skip
    if report.get("unlabelled_docs") == report.get("docs"):
        raise UserError(
            f"no document in {path} has a label field '{settings.fields.label}' to score against"
        )
    if report.get("invalid_records"):
        sys.stderr.write(
            f"noveld evaluate: {report['invalid_records']:,} invalid records were skipped, not "
            "scored (noveld run writes them to a DLQ with the reason)\n"
        )
    _print_report(report, ns.json)
    return 0


def _synth_config(ns: argparse.Namespace, embedding_dim: int | None = None) -> Any:
    kw = {
        k: v
        for k, v in {
            "n_docs": ns.docs,
            "n_stories": ns.stories,
            "vocab_size": ns.vocab,
            "doc_len_mean": ns.doc_len,
            "birth_rate": ns.birth_rate,
            "seed": ns.stream_seed,
            "n_sources": ns.sources,
            "embedding_dim": embedding_dim if embedding_dim is not None else ns.embeddings,
            "embedding_cosine": ns.embedding_cosine,
            "burstiness": ns.burstiness,
        }.items()
        if v is not None
    }
    try:
        return SynthConfig(**kw)
    except (TypeError, ValueError) as exc:
        raise UserError(f"invalid generator settings: {exc}") from exc


def _cmd_generate(ns: argparse.Namespace) -> int:
    from noveld.synth import write_jsonl

    cfg = _synth_config(ns)
    if ns.out is None or str(ns.out) == "-":
        write_jsonl(cfg, sys.stdout)
    else:
        if ns.out.is_dir():
            raise UserError(f"--out {ns.out} is a directory (name a file)")
        try:
            write_jsonl(cfg, ns.out)
        except OSError as exc:
            raise UserError(f"cannot write {ns.out}: {exc}") from exc
        sys.stderr.write(f"noveld: wrote {cfg.n_docs:,} documents to {ns.out}\n")
    return 0


_NOT_FOR_DEMO = {
    **{f"field_{n}": f"--{n}-field" for n in ("id", "text", "tokens", "embedding", "label", "ts")},
    "field_context": "--context-field",
    "max_doc_bytes": "--max-doc-bytes",
    "max_doc_tokens": "--max-doc-tokens",
    "oversize": "--oversize",
    "max_consecutive_invalid": "--max-consecutive-invalid",
}
"""Flags of the shared option groups that describe the user's input, which the demo does not
read: it generates its stream, with its own field names, and every record is valid."""


def _refuse_input_flags(ns: argparse.Namespace) -> None:
    """The demo's own stream makes input-field and input-limit flags meaningless: say so."""
    given = [flag for dest, flag in _NOT_FOR_DEMO.items() if getattr(ns, dest, None) is not None]
    if given:
        verb = "describes" if len(given) == 1 else "describe"
        raise UserError(
            f"{', '.join(given)} {verb} your input, and noveld demo generates its own stream; "
            "to cluster your file use noveld run or noveld evaluate with the same flags"
        )
    if ns.top < 1:
        raise UserError(f"--top {ns.top}: the demo lists at least one cluster (--top 1 or more)")


def _cmd_demo(ns: argparse.Namespace, settings_of: Callable[[argparse.Namespace], Settings]) -> int:
    from noveld.daemon.evaluate import run_and_record, score
    from noveld.synth import write_jsonl

    _refuse_input_flags(ns)
    own_vectors = getattr(ns, "featurizer", None) in (None, "words")
    if getattr(ns, "likelihood", None) == "vmf" and own_vectors:  # the demo makes embeddings
        ns.embedding_dim = ns.embedding_dim or DEMO_EMBEDDING_DIM
        ns.embedding_cosine = ns.embedding_cosine or SynthConfig().embedding_cosine
        ns.vmf_cosine = ns.vmf_cosine or ns.embedding_cosine  # the model told the truth
    settings = settings_of(ns)
    vmf = settings.model.likelihood == "vmf" and settings.model.featurizer == "words"
    if settings.model.likelihood == "edcm":  # show the EDCM on what it is for: bursty documents
        ns.burstiness = 5.0 if ns.burstiness is None else ns.burstiness
        ns.doc_len = 60.0 if ns.doc_len is None else ns.doc_len
    cfg = _synth_config(ns, settings.model.embedding_dim if vmf else None)
    if cfg.n_docs < 1:
        raise UserError(f"the demo needs at least one document (--docs {cfg.n_docs})")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "stream.jsonl"
        write_jsonl(cfg, path)
        settings = settings.model_copy(update={"dlq": Path(tmp) / "dlq.jsonl"})
        sys.stderr.write(
            f"noveld demo: generated {cfg.n_docs:,} documents from "
            f"{cfg.n_stories} synthetic stories (seed {cfg.seed}"
            + (f", bursty: B = {cfg.burstiness:g}" if cfg.burstiness else "")
            + "); clustering…\n"
        )
        rec, events, seconds, _ = run_and_record(settings, str(path), sys.stderr)
    print("== novelty events (cluster.born) ==")
    for ev in events:
        if ev["type"] == "cluster.born":
            terms = " ".join(t for t, _ in ev["top_terms"][:6])
            print(
                f"{ev['cluster_id']:>7}  born at doc {ev['born_at']['offset']:>6}  "
                f"confirmed at {ev['confirmed_at']['offset']:>6}  size {ev['size']}  [{terms}]"
            )
    print()
    print("== clusters ==")
    members: dict[int, Counter[str]] = defaultdict(Counter)
    for lab, c in zip(rec.labels, rec.clusters, strict=True):
        members[c][str(lab)] += 1
    print(f"{'cluster':>8} {'size':>6} {'purity':>7}  {'true label':<10} top terms")
    born = {ev["cluster_id"]: ev for ev in events if ev["type"] == "cluster.born"}
    for c, cnt in sorted(members.items(), key=lambda kv: -sum(kv[1].values()))[: ns.top]:
        size = sum(cnt.values())
        lab, n = cnt.most_common(1)[0]
        born_ev = born.get(f"c{c}")
        terms = " ".join(t for t, _ in born_ev["top_terms"][:6]) if born_ev else ""
        print(f"{'c' + str(c):>8} {size:>6} {n / size:>7.2f}  {lab:<10} {terms}")
    report = score(rec, events, seconds)
    print()
    print(
        f"NMI {report['nmi']:.3f} · ARI {report['ari']:.3f} · {report['clusters']} clusters "
        f"for {len(set(rec.labels))} true stories · novelty precision "
        f"{report['novelty_precision']:.2f} recall {report['novelty_recall']:.2f} · "
        f"{report['docs_per_second']:,.0f} docs/s"
    )
    return 0


def _add_synth_args(p: argparse.ArgumentParser) -> None:
    d = SynthConfig()
    g = p.add_argument_group("synthetic stream")
    g.add_argument("--docs", type=int, help=f"number of documents (default {d.n_docs})")
    g.add_argument("--stories", type=int, help=f"number of stories (default {d.n_stories})")
    g.add_argument("--vocab", type=int, help=f"vocabulary size (default {d.vocab_size})")
    g.add_argument(
        "--doc-len", type=float, help=f"mean document length in tokens (default {d.doc_len_mean})"
    )
    g.add_argument(
        "--birth-rate",
        type=float,
        help=f"probability that a document opens a new story (default {d.birth_rate})",
    )
    g.add_argument(
        "--sources",
        type=int,
        help="add a context field 'source' with this many values, 90%% the story's own",
    )
    g.add_argument(
        "--embeddings",
        type=int,
        metavar="DIM",
        help="add an embedding of this dimension to each document (vMF around its story's "
        f"direction; the demo adds {DEMO_EMBEDDING_DIM}-dimensional ones itself with "
        "--likelihood vmf, and sets --vmf-cosine to --embedding-cosine)",
    )
    g.add_argument(
        "--embedding-cosine",
        type=float,
        help="typical cosine of a document's embedding to its story's direction (0.8)",
    )
    g.add_argument(
        "--burstiness",
        type=float,
        help="make documents bursty: each word repeats an earlier one of its document with "
        "probability i/(B+i) (a Dirichlet compound multinomial; small B = bursty; 0 = off, the "
        "default; the demo uses 5 with 60-token documents for --likelihood edcm)",
    )
    g.add_argument(
        "--stream-seed",
        dest="stream_seed",
        type=int,
        help=f"generator seed (default {d.seed}; the model seed is --seed)",
    )


def add_tool_commands(
    sub: Any,
    add_common: Callable[[argparse.ArgumentParser], None],
    settings_of: Callable[[argparse.Namespace], Settings],
) -> None:
    """Register evaluate, generate and demo on the top-level subparsers."""
    ev = sub.add_parser(
        "evaluate",
        help="score clustering and novelty on a labelled JSONL file",
        description="Run the same pipeline in stream order over a labelled JSONL file and print "
        "nmi, ari, homogeneity, completeness, v_measure, purity, clusters, docs, "
        "seconds, docs_per_second, novelty_precision, novelty_recall and "
        "novelty_latency_docs; also births and true_clusters (what novelty was scored on), "
        "unlabelled_docs (not scored) and invalid_records (rejected as a run would dead-letter "
        "them, not scored). With --known-fraction: known_f1, known_classes, revealed_docs and "
        "scored_docs.",
    )
    ev.add_argument("input", help="labelled JSONL file (or - for stdin)")
    ev.add_argument("--json", action="store_true", help="JSON report on stdout")
    ev.add_argument(
        "--window",
        type=int,
        default=5,
        help="a birth is correct if its founding doc is among the first W docs of "
        "its true cluster (default 5)",
    )
    ev.add_argument(
        "--known-fraction",
        type=float,
        help="semi-supervised protocol (paper 000): reveal the labels of this fraction of the "
        "documents of half the classes as known categories; adds known_f1",
    )
    ev.add_argument(
        "--known-seed", type=int, default=0, help="seed choosing the known classes (default 0)"
    )
    add_common(ev)
    ev.set_defaults(func=lambda ns: _cmd_evaluate(ns, settings_of))

    gen = sub.add_parser(
        "generate",
        help="write a synthetic labelled stream (stories born over time)",
        description="Sample documents from the DP mixture-of-multinomials generative process "
        "with stories born over time; JSONL with id, text, label, ts.",
    )
    gen.add_argument("--out", "-o", type=Path, help="output file (default stdout)")
    _add_synth_args(gen)
    gen.set_defaults(func=_cmd_generate)

    demo = sub.add_parser(
        "demo",
        help="generate a stream, cluster it, show events and a summary table",
        description="The one-command first experience: generates a synthetic stream, runs the "
        "real pipeline over it, prints the cluster.born events and a table of "
        "clusters with their size, purity against the true story and top terms.",
    )
    _add_synth_args(demo)
    demo.add_argument("--top", type=int, default=20, help="clusters to list (default 20)")
    add_common(demo)
    demo.set_defaults(func=lambda ns: _cmd_demo(ns, settings_of))
