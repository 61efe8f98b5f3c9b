"""Running the ``noveld`` command line in tests as a user would: a subprocess of this
interpreter, its output captured."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

NOVELD = [sys.executable, "-m", "noveld"]  # the console script's entry point (noveld.launch)


def noveld(
    *args: str, input_text: str | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``noveld ARGS`` to completion, stdout and stderr captured as text."""
    return subprocess.run(
        [*NOVELD, *args], input=input_text, capture_output=True, text=True, timeout=timeout
    )


def redis_state(url: str, ns: str) -> dict[str, Any]:
    """``noveld state show --json`` of namespace ``ns`` in the Redis at ``url``."""
    out = noveld("state", "show", "--redis-url", url, "--namespace", ns, "--json", timeout=60)
    assert out.returncode == 0, out.stderr
    info: dict[str, Any] = json.loads(out.stdout)
    return info
