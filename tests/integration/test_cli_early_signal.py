"""A signal in the second the command line takes to import (numpy, numba, the kernels) ends
the process as an interrupt: exit 130 and a line, never a KeyboardInterrupt traceback (SIGINT)
or a silent death by signal (SIGTERM)."""

from __future__ import annotations

import shlex
import signal
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path

import pytest

from noveld.synth import SynthConfig, write_jsonl

ROOT = Path(__file__).resolve().parents[2]
ANNOUNCE_THEN_LAUNCH = """
import sys

class SayWhenNumpyComes:
    def find_spec(self, name, path=None, target=None):
        if name == "numpy":
            sys.meta_path.remove(self)
            sys.stderr.write("importing numpy\\n")
            sys.stderr.flush()
        return None  # the usual finders import it

sys.meta_path.insert(0, SayWhenNumpyComes())
from noveld.launch import main
raise SystemExit(main())
"""
"""The console script's body, saying when the heavy imports begin: the launcher imports numpy
(with the command line) only after it installed its interrupt handlers, so a signal sent on
that line arrives inside the imports, after the handlers."""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("after_s", [0.0, 0.3])
def test_a_signal_while_starting_is_an_interrupt_not_a_traceback(
    sig: signal.Signals, after_s: float, tmp_path: Path
) -> None:
    """The signal comes as the imports begin (synchronised on the launcher's numpy import),
    or ``after_s`` later, deeper inside them: that delay is the point, not a wait for
    something, and the imports take about a second."""
    docs = tmp_path / "docs.jsonl"
    write_jsonl(SynthConfig(n_docs=300, n_stories=4, seed=3), docs)
    proc = subprocess.Popen(
        [sys.executable, "-c", ANNOUNCE_THEN_LAUNCH, "run", "--input", str(docs)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    assert proc.stderr.readline() == "importing numpy\n"
    time.sleep(after_s)  # inside the imports
    proc.send_signal(sig)
    err = proc.stderr.read()
    proc.wait(timeout=60)
    assert "Traceback" not in err, err
    # 130 if the signal came before the pipeline's handler (the usual case: the import takes
    # a second), 0 if the machine is fast enough to have started the pipeline
    assert proc.returncode in (130, 0), (proc.returncode, err)
    if proc.returncode == 130:
        assert "noveld: interrupted" in err, err
    else:
        assert "stopped by signal" in err, err


def test_sigint_interrupts_a_start_even_when_inherited_ignored(tmp_path: Path) -> None:
    """A shell script's ``noveld run … &`` (or ``nohup``) starts noveld with SIGINT ignored,
    and Python keeps it so: a SIGINT during start-up was lost and the run went on to the end,
    though the same SIGINT a second later stops it. Start-up now honours it too."""
    docs = tmp_path / "docs.jsonl"
    write_jsonl(SynthConfig(n_docs=300, n_stories=4, seed=3), docs)
    launch = f"{shlex.quote(sys.executable)} -c {shlex.quote(ANNOUNCE_THEN_LAUNCH)}"
    proc = subprocess.Popen(
        ["sh", "-c", f'trap "" INT; exec {launch} run --input {shlex.quote(str(docs))}'],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    assert proc.stderr.readline() == "importing numpy\n"  # inside the imports: the
    # pipeline's own handler is a second away
    proc.send_signal(signal.SIGINT)
    err = proc.stderr.read()
    proc.wait(timeout=60)
    assert (proc.returncode, "Traceback" in err) == (130, False), (proc.returncode, err)
    assert "noveld: interrupted" in err, err


def test_an_interrupt_while_the_command_line_is_built_is_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command line imports some modules lazily while it builds its parser, outside the
    commands' own interrupt handling; a SIGINT there (seen under load, ~0.9 s into a start)
    ended in a KeyboardInterrupt traceback and exit -2."""
    import noveld.daemon.cli as cli
    from noveld.daemon.exits import EXIT_INTERRUPTED
    from noveld.launch import main

    def interrupted_build() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted_build)
    monkeypatch.setattr(sys, "argv", ["noveld", "run", "--input", "-"])
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        assert main() == EXIT_INTERRUPTED
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    assert "noveld: interrupted while starting" in capsys.readouterr().err


def test_an_interrupt_before_the_run_loop_says_nothing_was_read(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A signal while `run` builds its pipeline (loading the state and the encoder), before
    its loop takes the signals over, says so; after a loop, it is a plain interrupt."""
    import noveld.daemon.cli as cli
    from noveld.daemon import signals
    from noveld.daemon.exits import EXIT_INTERRUPTED

    def interrupted_run(ns: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "cmd_run", interrupted_run)
    monkeypatch.setattr(signals, "_taken_over", threading.Event())
    monkeypatch.setattr(sys, "argv", ["noveld", "run", "--input", "-"])
    assert cli.main() == EXIT_INTERRUPTED
    assert "interrupted while starting; nothing was read" in capsys.readouterr().err
    with signals.graceful_stop():
        pass
    assert cli.main() == EXIT_INTERRUPTED
    assert capsys.readouterr().err.strip() == "noveld: interrupted"


def test_the_console_script_goes_through_the_launcher() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["scripts"]["noveld"] == "noveld.launch:main"


def test_the_image_cache_seeds_an_empty_numba_cache_dir(tmp_path: Path) -> None:
    """The image's compiled kernels sit on its read-only filesystem, where numba cannot use
    them; a pod's empty cache directory gets a copy before numba is imported."""
    from noveld.launch import seed_numba_cache

    seed, target = tmp_path / "seed", tmp_path / "cache"
    (seed / "sub").mkdir(parents=True)
    (seed / "sub" / "kernel.nbi").write_bytes(b"index")
    env = {"NOVELD_NUMBA_CACHE_SEED": str(seed), "NUMBA_CACHE_DIR": str(target)}
    assert seed_numba_cache(env) == f"compiled kernels copied from {seed} to {target}"
    assert (target / "sub" / "kernel.nbi").read_bytes() == b"index"
    (seed / "sub" / "kernel.nbi").write_bytes(b"newer")
    assert seed_numba_cache(env) is None  # a cache of its own already: left alone
    assert (target / "sub" / "kernel.nbi").read_bytes() == b"index"
    assert seed_numba_cache({**env, "NUMBA_CACHE_DIR": str(seed)}) is None  # the seed itself
    assert seed_numba_cache({"NUMBA_CACHE_DIR": str(tmp_path / "other")}) is None
    assert not (tmp_path / "other").exists()
