"""`noveld fit` through the CLI: an archive's pass and Gibbs sweeps written into an empty state
dir or Redis namespace (real valkey), which `noveld run` then continues without reading the
archive again; occupied targets, unsupported models and bad records handled with a message."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest
from cli_runner import NOVELD

from noveld.state.memory import read_snapshot
from noveld.synth import SynthConfig, write_jsonl

pytestmark = pytest.mark.integration


def cli(*args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([*NOVELD, *args], capture_output=True, text=True, timeout=300)
    if ok:
        assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc


def show(*target: str) -> dict[str, object]:
    out: dict[str, object] = json.loads(cli("state", "show", *target, "--json").stdout)
    return out


@pytest.fixture(scope="module")
def halves(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """An archive (the first 1,500 documents of a generated stream) and the live rest."""
    d = tmp_path_factory.mktemp("data")
    stream = d / "s.jsonl"
    write_jsonl(SynthConfig(n_docs=3000, n_stories=30, seed=11), stream)
    lines = stream.read_text().splitlines(keepends=True)
    archive, live = d / "archive.jsonl", d / "live.jsonl"
    archive.write_text("".join(lines[:1500]))
    live.write_text("".join(lines[1500:]))
    return archive, live


def test_fit_writes_a_state_that_run_continues(halves: tuple[Path, Path], tmp_path: Path) -> None:
    archive, live = halves
    state = tmp_path / "state"
    fit = cli("fit", str(archive), "--state-dir", str(state), "--json")
    report = json.loads(fit.stdout)
    assert report["docs"] == 1500 and report["invalid_records"] == 0
    assert report["events_discarded"] > 0  # the pass's births went nowhere
    assert "sweep 1/5" in fit.stderr
    # the sweeps reassembled the stories the pass had split (generated truth)
    assert report["clusters"] < report["clusters_after_pass"]
    assert report["nmi"] > report["nmi_after_pass"] and report["nmi"] > 0.95
    info = show("--state-dir", str(state))
    assert info["docs"] == 1500 and info["active_clusters"] == report["clusters"]
    assert info["novelty_candidates"] == 0 and info["outbox_pending"] == 0
    assert info["offsets"] == {f"{archive}:0": 1500}
    # the archive is not read again, so nothing is counted twice
    again = cli("run", "--input", str(archive), "--state-dir", str(state))
    assert again.stdout == "" and "resuming" in again.stderr
    assert show("--state-dir", str(state))["docs"] == 1500
    # the live stream continues from the fitted clusters
    run = cli("run", "--input", str(live), "--state-dir", str(state))
    assert show("--state-dir", str(state))["docs"] == 3000
    born = [json.loads(x) for x in run.stdout.splitlines()]
    assert all(e["type"] == "cluster.born" for e in born)
    cold = cli("run", "--input", str(live), "--state-dir", str(tmp_path / "cold"))
    assert len(born) < len(cold.stdout.splitlines())  # the archive's stories are not news


def test_a_fitted_state_knows_its_archive(halves: tuple[Path, Path], tmp_path: Path) -> None:
    """The fit keeps the archive's checksum like a run does: `noveld run --input ARCHIVE` on
    the fitted state refuses another file at the archive's path instead of skipping its lines."""
    archive, live = halves
    copy, state = tmp_path / "archive.jsonl", tmp_path / "state"
    copy.write_text(archive.read_text())
    cli("fit", str(copy), "--state-dir", str(state), "--quiet")
    copy.write_text(live.read_text())  # replaced: the same number of lines, other documents
    refused = cli("run", "--input", str(copy), "--state-dir", str(state), ok=False)
    assert refused.returncode == 2 and "the first 1,500 lines of" in refused.stderr


def test_fit_into_redis_equals_fit_into_a_state_dir(
    redis_url: str, halves: tuple[Path, Path], tmp_path: Path
) -> None:
    archive, live = halves
    ns = ["--redis-url", redis_url, "--namespace", "fitted"]
    cli("fit", str(archive), *ns, "--quiet", "--dlq", str(tmp_path / "d.jsonl"))
    cli("fit", str(archive), "--state-dir", str(tmp_path / "s"), "--quiet")
    in_redis, in_dir = show(*ns), show("--state-dir", str(tmp_path / "s"))
    for key in ("digest", "docs", "active_clusters", "vocab", "offsets", "fingerprint"):
        assert in_redis[key] == in_dir[key], key
    cli("run", "--input", str(live), *ns, "--quiet", "--dlq", str(tmp_path / "d2.jsonl"))
    assert show(*ns)["docs"] == 3000
    refused = cli("fit", str(archive), *ns, ok=False)
    assert refused.returncode == 2 and "already holds state" in refused.stderr


def test_fit_refuses_what_it_cannot_do(halves: tuple[Path, Path], tmp_path: Path) -> None:
    archive, _ = halves
    state = ["--state-dir", str(tmp_path / "s")]
    cases = [
        (["fit", str(archive), *state, "--model", "svi"], "warm start"),
        (["fit", str(archive), *state, "--model", "hdp"], "hybrid or edcm likelihood"),
        (["fit", str(archive)], "--state-dir DIR or --redis-url"),
        (["fit", "-", *state], "not a file"),
        (["fit", str(tmp_path / "missing.jsonl"), *state], "not a file"),
        (["fit", str(archive), *state, "--sweeps", "-1"], "--sweeps"),
    ]
    for args, message in cases:
        proc = cli(*args, ok=False)
        assert proc.returncode == 2 and message in proc.stderr, (args, proc.stderr)
    assert not (tmp_path / "s" / "state.npz").exists()
    cli("fit", str(archive), *state, "--quiet")
    occupied = cli("fit", str(archive), *state, ok=False)
    assert occupied.returncode == 2 and "already holds state" in occupied.stderr


def test_fit_dead_letters_bad_records(halves: tuple[Path, Path], tmp_path: Path) -> None:
    archive, _ = halves
    lines = archive.read_text().splitlines(keepends=True)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(lines[:100]) + "{not json\n" + '{"id": "x", "text": ""}\n')
    dlq = tmp_path / "dlq.jsonl"
    proc = cli("fit", str(bad), "--state-dir", str(tmp_path / "s"), "--dlq", str(dlq), "--json")
    report = json.loads(proc.stdout)
    assert report["docs"] == 100 and report["invalid_records"] == 2
    reasons = [json.loads(x)["reason"] for x in dlq.read_text().splitlines()]
    assert len(reasons) == 2
    assert show("--state-dir", str(tmp_path / "s"))["offsets"] == {f"{bad}:0": 102}


def test_a_circuit_breaker_in_the_archive_writes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(f"not json {i}\n" for i in range(20)))
    state = tmp_path / "s"
    proc = cli(
        "fit", str(bad), "--state-dir", str(state), "--max-consecutive-invalid", "5", ok=False
    )
    assert proc.returncode == 3 and "nothing was written" in proc.stderr
    assert "fit again" in proc.stderr and "resume" not in proc.stderr  # nothing to resume
    assert not (state / "state.npz").exists()


def test_sigterm_during_the_pass_writes_nothing(tmp_path: Path) -> None:
    archive = tmp_path / "big.jsonl"
    write_jsonl(SynthConfig(n_docs=200_000, n_stories=200, seed=3), archive)
    state = tmp_path / "s"
    proc = subprocess.Popen(
        [*NOVELD, "fit", str(archive), "--state-dir", str(state)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NOVELD_PROGRESS_INTERVAL_S": "0.05"},
    )
    assert proc.stderr is not None
    first_progress = proc.stderr.readline()  # the pass is under way
    assert "docs" in first_progress, first_progress
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "nothing was written" in err and "Traceback" not in err
    assert not (state / "state.npz").exists()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_the_sweeps_writes_nothing(sig: signal.Signals, tmp_path: Path) -> None:
    """The sweeps stop after the one under way: exit 130, the target left empty."""
    archive = tmp_path / "a.jsonl"
    write_jsonl(SynthConfig(n_docs=20_000, n_stories=100, seed=5), archive)
    state = tmp_path / "s"
    proc = subprocess.Popen(
        [
            *NOVELD,
            "fit",
            str(archive),
            "--state-dir",
            str(state),
            "--sampled",
            "--sweeps",
            "100000",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    lines = []
    while not any("sweep 2/" in line for line in lines):  # the sweeps are under way
        line = proc.stderr.readline()
        assert line, "".join(lines)
        lines.append(line)
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "stopped by a signal after sweep" in err and "nothing was written" in err
    assert "Traceback" not in err
    assert not (state / "state.npz").exists()


HYBRID = ["--likelihood", "hybrid", "--featurizer", "hybrid"]


def test_a_hybrid_fit_writes_a_state_that_run_continues(
    halves: tuple[Path, Path], tmp_path: Path
) -> None:
    """The blocked Gibbs sweeps under words × vectors: every document counted once in both
    views (masses, tokens, each cluster's resultant of the encoder's unit vectors), and the
    live stream continues from the fitted clusters."""
    archive, live = halves
    state = tmp_path / "state"
    fit = cli("fit", str(archive), "--state-dir", str(state), "--json", *HYBRID)
    report = json.loads(fit.stdout)
    assert report["docs"] == 1500 and "sweep 1/5" in fit.stderr
    assert report["nmi"] >= report["nmi_after_pass"] - 0.01 and report["nmi"] > 0.9
    fitted, _ = read_snapshot(state / "state.npz")
    s = fitted.stats
    alive = s.active_slots()
    assert alive.shape[0] == report["clusters"]
    assert float((s.m[alive] * s.scale).sum()) == 1500.0  # each document once
    dims = [i for i, w in enumerate(fitted.vocab) if w.startswith("\x00vmf/")]
    assert len(dims) == 2 * 256
    dim_ids = np.array(dims)
    for k in alive.tolist():  # the vectors' parts: a resultant no longer than its mass
        ws, cs = s.word_counts(k)
        parts = cs[np.isin(ws, dim_ids)] * s.scale
        assert 0.0 < float(np.linalg.norm(parts)) <= float(s.m[k] * s.scale) + 1e-9
        assert float(cs[~np.isin(ws, dim_ids)].sum()) == float(s.ntok[k])  # tokens: words
    assert float(s.ntok[alive].sum() * s.scale) == show("--state-dir", str(state))["tokens"]
    run = cli("run", "--input", str(live), "--state-dir", str(state), *HYBRID)
    assert show("--state-dir", str(state))["docs"] == 3000
    cold = cli("run", "--input", str(live), "--state-dir", str(tmp_path / "cold"), *HYBRID)
    assert len(run.stdout.splitlines()) < len(cold.stdout.splitlines())


EDCM = ["--likelihood", "edcm"]


def test_an_edcm_fit_writes_a_state_that_run_continues(
    halves: tuple[Path, Path], tmp_path: Path
) -> None:
    """The EDCM's site-by-site sweeps: the state counts each document as the streaming EDCM
    does (its distinct words once, one length-bin entry), the same totals as a run over the
    archive, and the live stream continues from the fitted clusters."""
    archive, live = halves
    state = tmp_path / "state"
    fit = cli("fit", str(archive), "--state-dir", str(state), "--json", *EDCM)
    report = json.loads(fit.stdout)
    assert report["docs"] == 1500 and "sweep 1/5" in fit.stderr
    assert report["clusters"] < report["clusters_after_pass"]
    assert report["nmi"] > report["nmi_after_pass"]
    fitted, _ = read_snapshot(state / "state.npz")
    s = fitted.stats
    alive = s.active_slots()
    assert alive.shape[0] == report["clusters"]
    assert float((s.m[alive] * s.scale).sum()) == 1500.0
    bins = np.array([i for i, w in enumerate(fitted.vocab) if w.startswith("\x00edcm/len/")])
    assert bins.shape[0] > 0
    for k in alive.tolist():
        ws, cs = s.word_counts(k)
        assert float(cs[np.isin(ws, bins)].sum()) == float(s.m[k])  # one length entry per doc
        assert float(cs.max()) <= float(s.m[k])  # document frequencies
        assert float(cs.sum()) == float(s.ntok[k])
    streamed = tmp_path / "streamed"
    cli("run", "--input", str(archive), "--state-dir", str(streamed), *EDCM)
    assert show("--state-dir", str(state))["tokens"] == show("--state-dir", str(streamed))["tokens"]
    run = cli("run", "--input", str(live), "--state-dir", str(state), *EDCM)
    assert show("--state-dir", str(state))["docs"] == 3000
    cold = cli("run", "--input", str(live), "--state-dir", str(tmp_path / "cold"), *EDCM)
    assert len(run.stdout.splitlines()) < len(cold.stdout.splitlines())
