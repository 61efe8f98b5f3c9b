"""Entry point of the ``noveld`` console script (and ``python -m noveld``).

Importing the command line takes about a second (numpy, numba, the kernels). A Ctrl-C in that
second used to end in a ``KeyboardInterrupt`` traceback, and a SIGTERM before the pipeline's
own handler (``graceful_stop``) killed the process without a word. Both now end as an interrupt:
exit 130 and a line saying so."""

from __future__ import annotations

import signal
import sys

EXIT_INTERRUPTED = 130
"""Exit code of a run interrupted before its pipeline started (docs/operations.md)."""


def main() -> int:
    """Import the command line and run it; SIGTERM interrupts like SIGINT until a command
    installs its own handler (``noveld run``'s stops after the batch and saves)."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        from noveld.daemon.cli import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write("noveld: interrupted while starting; nothing was read or written\n")
        return EXIT_INTERRUPTED
    return cli_main()
