"""The first run says that it compiles the kernels (10–30 s otherwise silent); later runs,
with the kernels in numba's cache, say nothing of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from noveld.launch import kernel_cache_dirs, kernels_cached, say_compiling


def test_an_empty_cache_is_said_once_compiled_is_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"NUMBA_CACHE_DIR": str(tmp_path)}
    assert not kernels_cached(env)
    assert say_compiling(["run", "--input", "x.jsonl"], env)
    assert capsys.readouterr().err == "noveld: compiling kernels (once)…\n"
    index = kernel_cache_dirs(env)[0]
    index.mkdir(parents=True)
    (index / "hdp.seat-12.py311.nbi").write_bytes(b"")  # numba's index of a cached kernel
    assert kernels_cached(env)
    assert not say_compiling(["run", "--input", "x.jsonl"], env)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    "argv", [[], ["generate", "--docs", "5"], ["state", "show"], ["run", "-q"], ["fit", "--help"]]
)
def test_commands_that_compile_nothing_or_are_quiet_say_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    assert not say_compiling(argv, {"NUMBA_CACHE_DIR": str(tmp_path)})
    assert capsys.readouterr().err == ""


def test_the_cache_next_to_the_kernels_counts(tmp_path: Path) -> None:
    """Without NUMBA_CACHE_DIR numba writes ``__pycache__`` beside each kernel package (or,
    read-only there, the user-wide cache): both are looked at."""
    dirs = kernel_cache_dirs({"XDG_CACHE_HOME": str(tmp_path)})
    assert any(d.name == "__pycache__" and d.parent.name == "kernels" for d in dirs)
    assert any(d.parent == tmp_path / "numba" for d in dirs)
