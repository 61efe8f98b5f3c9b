"""Every benchmark script still runs against the code it measures: each on a tiny generated
stream with its smallest options, exiting 0 and printing its result line (not its numbers:
those are in docs/benchmarks.md). bench_compaction.py has its own test
(tests/unit/test_benchmark_scripts.py). Those that need a broker or Redis start their own."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runner import noveld

pytestmark = pytest.mark.integration

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
DATA = "{data}"  # replaced by the tiny stream's path
SLOW = pytest.mark.slow

#: two replicas on a small, slow stream: one consumer-group join and one reconciliation round
SCALEOUT_ARGS = ["--replicas", "2", "--batch-size", "50", "--rate", "400", "--max-wait-ms", "300",
                 "--tail", "100", "--cost-rounds", "1"]  # fmt: skip

CASES = [
    pytest.param(
        "bench_e2e", ["--data", DATA, "--repeat", "1"], r"wall clock: .* docs/s", id="e2e"
    ),
    pytest.param(
        "bench_stories",
        ["--data", DATA, "--times", "1", "--rounds", "1"],
        r"story stage \+ fold: [\d.]+ s = [\d.]+ µs/doc",
        id="stories",
    ),
    pytest.param(
        "bench_e2e",
        ["--data", DATA, "--repeat", "1", "--ui", "watched", "--ui-every", "0.2"],
        r"web view watched every 0.2 s\n(.*\n)*.*wall clock: .* docs/s",
        id="e2e-ui",
    ),
    pytest.param(
        "bench_encoder",
        ["--data", DATA, "--dims", "64", "--repeats", "1"],
        r"\n +64 +\d+ +\d+\.\d",
        id="encoder",
    ),
    pytest.param(
        "bench_hybrid",
        ["--data", DATA, "--rounds", "1", "--dim", "64", "--uniform-prior"],
        r"hybrid: median +[\d,]+ docs/s.*\n.*uniform: median +[\d,]+ docs/s",
        id="hybrid",
    ),
    pytest.param(
        "ceiling_hybrid",
        ["--data", DATA, "--weights", "0.25", "--cosines", "0.4", "--dim", "64"],
        r"NMI of seating against the true history, w 0.25, cos 0.4 .*: \d\.\d{4}",
        id="ceiling_hybrid",
    ),
    pytest.param(
        "ceiling_hybrid",
        [
            "--data",
            DATA,
            "--weights",
            "0.25",
            "--cosines",
            "0.4",
            "--dim",
            "64",
            "--known-fraction",
            "0.4",
            "--leave-one-out",
            "--tempering",
            "15",
        ],
        r"leave-one-out words × vMF, w 0.25, .*: known_f1 \d\.\d{4}, NMI on the unrevealed",
        id="ceiling_hybrid_known",
    ),
    pytest.param(
        "edcm_long_docs",
        ["--data", DATA],
        r"nmi \d\.\d+ .* clusters \d+",
        id="edcm_long_docs",
    ),
    pytest.param(
        "quality_hybrid",
        ["--data", DATA, "--weights", "0.25", "--cosines", "0.4", "--dim", "64"],
        r"hybrid w 0.25 cos 0.4: NMI \d\.\d+",
        id="quality_hybrid",
    ),
    pytest.param(
        "quality_kappa",
        ["--data", DATA, "--dims", "64", "--likelihoods", "vmf", "--cosines", "learned", "0.5"],
        r"vmf cosine learned: NMI \d\.\d+ .* estimator on its partition \d\.\d+",
        id="quality_kappa",
    ),
    pytest.param(
        "bench_failover",
        ["--data", DATA, "--topology", "sentinel", "--repeat", "1", "--rate", "200"],
        r"sentinel run 1: promoted [\d.]+ s",
        id="failover",
        marks=SLOW,
    ),
    pytest.param(
        "bench_hdp",
        [
            *("--data", DATA, "--repeat", "1", "--topics", "100", "--sweeps", "1"),
            *("--document-concentration", "50"),
        ],
        r"NMI \d\.\d+, categories \d+, [\d,]+ docs/s",
        id="hdp",
        marks=SLOW,  # compiles the HDP kernels when their cache is cold
    ),
    pytest.param(
        "bench_hdp",
        [
            *("--data", DATA, "--repeat", "1", "--topics", "100", "--sweeps", "1"),
            *("--featurizer", "hybrid", "--encoder-dim", "64"),
        ],
        r"hybrid .*NMI \d\.\d+, categories \d+, [\d,]+ docs/s",
        id="hdp_hybrid",
        marks=SLOW,  # compiles the HDP kernels when their cache is cold
    ),
    pytest.param(
        "quality_hdp_long",
        ["--data", DATA, "--seeds", "0", "--set", "model.topics=100", "--per-label"],
        r"seed 0: NMI \d\.\d+ .* clusters +\d+(?s:.*)in largest \d\.\d\d(?s:.*)median NMI",
        id="quality_hdp_long",
        marks=SLOW,  # compiles the HDP kernels when their cache is cold
    ),
    pytest.param(
        "bench_kafka_e2e",
        [
            *["--data", DATA, "--times", "1", "--batch-size", "100"],
            *["--ui", "watched", "--ui-every", "0.2"],
        ],
        r"drained 400 docs; steady state [\d,]+ docs/s.*web view watched"
        r"(?s:.*)lag recovery after SIGKILL",
        id="kafka_e2e",
        marks=SLOW,  # two consumer-group joins
    ),
    pytest.param(
        "bench_memory",
        ["--docs", "2000", "--stories", "20", "--half-life", "500"],
        r"2,000 docs +RSS .* docs/s",
        id="memory",
    ),
    pytest.param(
        "bench_model",
        ["--data", DATA, "--repeat", "1", "--document-concentration", "50"],
        r"defaults \(2 sweeps\): +[\d,]+ docs/s",
        id="model",
    ),
    pytest.param(
        "bench_redis_commit",
        ["--data", DATA, "--times", "1", "--batch-size", "100"],
        r"400 docs in [\d.]+ s \([\d,]+ docs/s(?s:.*)commit per batch: p50",
        id="redis_commit",
    ),
    pytest.param(
        "bench_scaleout",
        ["--data", DATA, *SCALEOUT_ARGS],
        r"\n 2 +\d\.\d{3}( +\d+){4}(?s:.*)reconciliation on [\d,]+ docs/s, off",
        id="scaleout",
        marks=SLOW,  # a consumer-group join of two replicas
    ),
    pytest.param(
        "sim_scaleout",
        ["--data", DATA, "--replicas", "1", "2", "--batch-size", "50", "--doc-ms", "1"],
        r"\n 2 +\d\.\d{4} +\d+ +\d+ +\d+ +\d+ +25 ",
        id="sim_scaleout",
    ),
    pytest.param(
        "bench_scaleout",
        ["--data", DATA, "--model", "hdp", *SCALEOUT_ARGS],
        r"model hdp(?s:.*)\n 2 +\d\.\d{3}( +\d+){4}(?s:.*)reconciliation on [\d,]+ docs/s",
        id="scaleout_hdp",
        marks=SLOW,
    ),
    pytest.param(
        "bench_vmf",
        ["--docs", "500", "--dim", "16", "--stories", "5", "--repeat", "1"],
        r"model step: [\d,]+ docs/s",
        id="vmf",
    ),
    pytest.param(
        "bench_vocabulary",
        ["--data", DATA, "--words", "1000"],
        r"Heaps' law fit: V = (?s:.*)cost per word",
        id="vocabulary",
    ),
    pytest.param(
        "bursty_stream",
        ["--docs", "300", "--stories", "5", "--vocab", "500", "--burstiness", "5.0"],
        r"edcm: NMI \d\.\d+ .* docs/s",
        id="bursty_stream",
    ),
    pytest.param(
        "bursty_stream",
        ["--docs", "300", "--length", "400", "--burstiness", "5", "--out", DATA + ".long"],
        r"wrote 300 documents \(burstiness 5\) to .*\.long",
        id="bursty_stream_out",
    ),
    pytest.param(
        "ceiling_merge_resolution",
        ["--data", DATA, "--thresholds", "0"],
        r"likelihood merges, gain > 0 nats: NMI \d\.\d+",
        id="ceiling_merge_resolution",
    ),
    pytest.param(
        "ceiling_perfect_history",
        ["--data", DATA],
        r"NMI of .* \d\.\d{4}",
        id="ceiling_perfect_history",
    ),
    pytest.param(
        "offline_gibbs",
        ["--data", DATA, "--sweeps", "0", "1"],
        r"1 sweeps: NMI \d\.\d+, \d+ clusters",
        id="offline_gibbs",
    ),
    pytest.param(
        "warm_start",
        ["--data", DATA, "--sweeps", "1"],
        r"warm: fit \(1 sweeps\): archive_nmi \d",
        id="warm_start",
    ),
]


@pytest.fixture(scope="module")
def tiny_stream(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """400 labelled documents of 6 stories."""
    path = tmp_path_factory.mktemp("bench") / "tiny.jsonl"
    out = noveld("generate", "--docs", "400", "--stories", "6", "--stream-seed", "3",
                 "--out", str(path))  # fmt: skip
    assert out.returncode == 0, out.stderr
    return path


def test_every_benchmark_script_has_a_smoke_case() -> None:
    """A new script gets a case here (bench_compaction.py has its own test)."""
    scripts = {p.stem for p in BENCHMARKS.glob("*.py") if not p.stem.startswith("_")}
    covered = {case.values[0] for case in CASES} | {"bench_compaction"}
    assert scripts == covered


@pytest.mark.parametrize(("script", "args", "result"), CASES)
def test_benchmark_script_runs_and_prints_its_result(
    tiny_stream: Path, script: str, args: list[str], result: str
) -> None:
    argv = [a.replace(DATA, str(tiny_stream)) for a in args]
    out = subprocess.run(
        [sys.executable, str(BENCHMARKS / f"{script}.py"), *argv],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert re.search(result, out.stdout), out.stdout[-3000:]
