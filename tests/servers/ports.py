"""Free loopback ports and unique names, so parallel test workers share nothing by accident."""

from __future__ import annotations

import random
import socket
import uuid


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (client sockets' local ports)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as fh:
            return int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768  # Linux's default


def _unused_port(low: int, high: int, also: int | None = None) -> int:
    """A port in [low, high) free on 127.0.0.1 now (and ``port + also`` too)."""
    rng = random.Random()
    while True:
        port = rng.randrange(low, high)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                if also is not None:
                    b.bind(("127.0.0.1", port + also))
        except OSError:
            continue
        return port


def cluster_port() -> int:
    """A free port whose cluster bus port (+10000) is free too, as a cluster node needs; both
    below the ephemeral range (:func:`free_port`)."""
    low = _ephemeral_low()
    return _unused_port(10_000, max(low - 10_000, 10_001), also=10_000)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now, below the kernel's ephemeral range. A port the OS
    hands out (bind to 0) is an ephemeral one, which any client socket may take as its local
    port meanwhile: a server killed and restarted on its port then failed with "Address
    already in use"."""
    return _unused_port(10_000, _ephemeral_low())


def unique_name(prefix: str) -> str:
    """A topic/group/namespace name no other test uses, so a shared server needs no reset."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"
