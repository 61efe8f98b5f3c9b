"""``python -m noveld.synth [n_docs]``: write a stream to stdout and its timing to stderr."""

from __future__ import annotations

import sys
import time

from noveld.synth.config import SynthConfig
from noveld.synth.stream import write_jsonl


def main() -> None:
    """``python -m noveld.synth [n_docs]``: write a stream to stdout and its timing to stderr."""
    n_docs = int(sys.argv[1]) if len(sys.argv) > 1 else SynthConfig().n_docs
    t0 = time.perf_counter()
    n = write_jsonl(SynthConfig(n_docs=n_docs), sys.stdout)
    sys.stderr.write(
        f"{n} documents in {time.perf_counter() - t0:.2f} s "
        f"({n / max(time.perf_counter() - t0, 1e-9):,.0f} docs/s)\n"
    )


if __name__ == "__main__":
    main()
