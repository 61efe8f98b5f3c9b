"""Entry point of the ``noveld`` console script (and ``python -m noveld``).

Importing the command line takes about a second (numpy, numba, the kernels). A Ctrl-C in that
second used to end in a ``KeyboardInterrupt`` traceback, and a SIGTERM before the pipeline's
own handler (``graceful_stop``) killed the process without a word. Both now end as an interrupt:
exit 130 and a line saying so."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import sys
from collections.abc import Mapping
from pathlib import Path

from noveld.daemon.exits import EXIT_INTERRUPTED


def seed_numba_cache(environ: Mapping[str, str] = os.environ) -> str | None:
    """Copy the compiled kernels of ``NOVELD_NUMBA_CACHE_SEED`` (the image's, built at image
    build time) into an empty ``NUMBA_CACHE_DIR``, before numba is imported; what was done,
    or None. The container image compiles its kernels into a directory of its read-only
    filesystem, where numba cannot use them (it needs a writable cache directory), so a pod
    with its cache on an ``emptyDir`` compiled every kernel again (20–30 s) at each start."""
    seed, target = environ.get("NOVELD_NUMBA_CACHE_SEED"), environ.get("NUMBA_CACHE_DIR")
    if not seed or not target or not os.path.isdir(seed):
        return None
    if os.path.realpath(seed) == os.path.realpath(target):
        return None
    if os.path.isdir(target) and os.listdir(target):
        return None  # a cache of its own already (a restart of this pod)
    try:
        shutil.copytree(seed, target, dirs_exist_ok=True)
    except OSError as exc:  # then numba compiles, as it would without a seed
        return f"could not copy the compiled kernels from {seed} to {target}: {exc}"
    return f"compiled kernels copied from {seed} to {target}"


BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
"""One BLAS thread unless the operator says otherwise: a noveld process steps one batch at a
time, and the small matrix products of the vector likelihoods ran ~2.7x slower end to end
with a thread per core fighting the pipeline's own thread."""


def one_blas_thread(environ: dict[str, str] | os._Environ[str] = os.environ) -> None:
    """Ask BLAS for one thread (before numpy is imported), keeping any value already set."""
    for name in BLAS_THREAD_VARIABLES:
        environ.setdefault(name, "1")


KERNEL_COMMANDS = frozenset({"run", "evaluate", "demo", "fit"})
"""The commands that cluster, and so compile the numba kernels on their first use."""

_KERNELS = Path(__file__).resolve().parent / "models" / "kernels"


def kernel_cache_dirs(environ: Mapping[str, str] = os.environ) -> list[Path]:
    """Where numba keeps the compiled kernels (``NUMBA_CACHE_DIR``, else ``__pycache__`` next
    to them, else the user-wide cache): one directory per kernel package."""
    packages = [_KERNELS, *(p for p in _KERNELS.iterdir() if (p / "__init__.py").exists())]
    target = environ.get("NUMBA_CACHE_DIR")
    if target:
        return [Path(target) / _cache_subpath(p) for p in packages]
    home = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return [p / "__pycache__" for p in packages] + [
        Path(home) / "numba" / _cache_subpath(p) for p in packages
    ]


def _cache_subpath(package: Path) -> str:
    """numba's name for a source directory's cache (``get_suitable_cache_subpath``)."""
    return f"{package.name}_{hashlib.sha1(str(package).encode()).hexdigest()}"


def kernels_cached(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether numba has compiled noveld's kernels before (an index file of its cache is
    there): a glob of a few directories, no numba import."""
    return any(any(d.glob("*.nbi")) for d in kernel_cache_dirs(environ) if d.is_dir())


def say_compiling(argv: list[str], environ: Mapping[str, str] = os.environ) -> bool:
    """Say on stderr that the kernels compile now, once, when a clustering command starts
    with none cached (10–30 s otherwise silent); whether it was said."""
    if not argv or argv[0] not in KERNEL_COMMANDS or {"-q", "--quiet", "-h", "--help"} & set(argv):
        return False
    if kernels_cached(environ):
        return False
    sys.stderr.write("noveld: compiling kernels (once)…\n")
    sys.stderr.flush()
    return True


def main() -> int:
    """Import the command line and run it; SIGTERM interrupts like SIGINT until a command
    installs its own handler (``noveld run``'s stops after the batch and saves).

    SIGINT interrupts even when noveld was started with it ignored (``cmd &`` in a script, or
    ``nohup``, leave it so, and Python then keeps it ignored): ``noveld run`` stops on SIGINT
    once its loop runs, so start-up behaves the same rather than ignoring it until then."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.default_int_handler)
    if sys.argv[1:2] == ["check"]:  # probes run it every few seconds: no numpy, no numba
        from noveld.daemon.check import main as check_main

        try:
            return check_main(sys.argv[2:])
        except KeyboardInterrupt:
            return EXIT_INTERRUPTED
    one_blas_thread()
    try:
        seeded = seed_numba_cache()
        if seeded is not None and seeded.startswith("could not"):
            sys.stderr.write(f"noveld: warning: {seeded}\n")
        say_compiling(sys.argv[1:])
        from noveld.daemon.cli import main as cli_main

        # a command's own interrupts end inside cli_main; one that escapes it came while the
        # command line was built (lazy imports), before any command ran
        return cli_main()
    except KeyboardInterrupt:
        sys.stderr.write("noveld: interrupted while starting; nothing was read or written\n")
        return EXIT_INTERRUPTED
