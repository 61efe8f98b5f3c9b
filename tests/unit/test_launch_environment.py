"""The launcher's environment for the process: one BLAS thread unless the operator set one."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from noveld.launch import BLAS_THREAD_VARIABLES, one_blas_thread


def test_one_blas_thread_keeps_an_operators_choice() -> None:
    env = {"OPENBLAS_NUM_THREADS": "4"}
    one_blas_thread(env)
    assert env == {"OPENBLAS_NUM_THREADS": "4", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _settled_threads(extra_env: dict[str, str]) -> int:
    """Threads of a ``noveld run`` reading an idle stdin, once their number stops changing."""
    env = {k: v for k, v in os.environ.items() if k not in BLAS_THREAD_VARIABLES}
    env.update(extra_env)
    proc = subprocess.Popen(
        [sys.executable, "-m", "noveld", "run", "--input", "-", "--quiet"],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    try:
        status = Path(f"/proc/{proc.pid}/status")
        seen: list[int] = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (len(seen) < 8 or len(set(seen[-8:])) > 1):
            line = next(x for x in status.read_text().splitlines() if x.startswith("Threads:"))
            seen.append(int(line.split()[1]))
            time.sleep(0.25)
        return seen[-1]
    finally:
        proc.kill()
        proc.wait()


def test_noveld_starts_no_extra_blas_threads() -> None:
    """OpenBLAS starts a thread per extra core when numpy loads, unless told one thread: the
    daemon left alone has fewer threads than one told to use two."""
    if (os.cpu_count() or 1) < 2:
        return  # one core: OpenBLAS starts no extra thread either way
    assert _settled_threads({}) < _settled_threads({"OPENBLAS_NUM_THREADS": "2"})
