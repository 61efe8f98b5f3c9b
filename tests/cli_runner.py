"""Running the ``noveld`` command line in tests as a user would: a subprocess of this
interpreter, its output captured."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from typing import IO, Any

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


def wait_for_output(stream: IO[str] | IO[bytes], text: str, timeout: float) -> str:
    """Read a running process's pipe until ``text`` appears; return what was read (raise
    ``AssertionError`` with it after ``timeout`` s or at end of file). Reads the file
    descriptor itself, so nothing stays buffered in ``stream``: ``communicate`` later gets
    exactly the rest."""
    fd, seen = stream.fileno(), b""
    needle, deadline = text.encode(), time.monotonic() + timeout
    while needle not in seen:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise AssertionError(f"no {text!r} within {timeout} s; output so far:\n{seen!r}")
        chunk = os.read(fd, 65536)
        if not chunk:
            raise AssertionError(f"output ended before {text!r}:\n{seen.decode(errors='replace')}")
        seen += chunk
    return seen.decode(errors="replace")
