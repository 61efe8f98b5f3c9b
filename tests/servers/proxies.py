"""Loopback TCP proxies in front of a test server: a byte proxy, a partitionable one (network
partitions) and TLS termination (the daemon's TLS clients against plaintext servers)."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
from pathlib import Path
from typing import Self

from servers.ports import free_port
from servers.process import Started


class ByteProxy(Started):
    """A loopback TCP proxy to ``target_port`` on its own event-loop thread; TLS on the client
    side when ``context`` is given. ``_admit`` may talk to the client first (and refuse it)
    before the bytes flow through untouched."""

    def __init__(self, target_port: int, context: ssl.SSLContext | None = None) -> None:
        self.target_port = target_port
        self.port = free_port()
        self._context = context
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None

    async def _admit(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_reader: asyncio.StreamReader,
        up_writer: asyncio.StreamWriter,
    ) -> bool:
        """Whether to connect the client through (default: always)."""
        return True

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (OSError, ssl.SSLError):
            pass
        finally:
            writer.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        try:
            admitted = await self._admit(reader, writer, up_reader, up_writer)
        except (OSError, ssl.SSLError, asyncio.IncompleteReadError, ValueError):
            admitted = False
        if not admitted:
            writer.close()
            up_writer.close()
            return
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    def start(self) -> Self:
        """Listen (returns once the port is bound)."""
        self._thread.start()
        serve = asyncio.start_server(
            self._connection, "127.0.0.1", self.port, ssl=self._context, reuse_address=True
        )
        self._server = asyncio.run_coroutine_threadsafe(serve, self._loop).result(timeout=10)
        return self

    async def _shutdown(self) -> None:
        """Stop listening and cancel every connection's pipes (closing their sockets) while
        the loop still runs: a pipe left suspended is closed by the garbage collector later,
        against a stopped loop ("Event loop is closed")."""
        if self._server is not None:
            self._server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def stop(self) -> None:
        """Stop listening, close every connection and end the loop."""
        if self._thread.is_alive():
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)


class PartitionProxy(ByteProxy):
    """A plain TCP proxy that can stop forwarding (:meth:`partition`) and start again
    (:meth:`heal`): a network partition that drops nothing and resets no connection, as a
    lost route or a stateful firewall does. Connections stay open, new ones are accepted,
    and what was sent meanwhile arrives after the heal, as TCP retransmits it."""

    def __init__(self, target_port: int) -> None:
        super().__init__(target_port)
        self._open = threading.Event()
        self._open.set()
        self._marker: bytes | None = None
        self.holding = threading.Event()  # set once :meth:`partition_at` partitioned

    def partition(self) -> None:
        """Stop forwarding bytes, both ways, on every connection."""
        self._open.clear()

    def partition_at(self, marker: bytes) -> None:
        """Partition just before forwarding the first chunk that contains ``marker`` (a
        request the test wants caught in flight); :attr:`holding` is set then."""
        self.holding.clear()
        self._marker = marker

    def heal(self) -> None:
        """Forward again, what was held first."""
        self._open.set()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                if self._marker is not None and self._marker in data:
                    self._marker = None
                    self._open.clear()
                    self.holding.set()
                while not self._open.is_set():
                    await asyncio.sleep(0.05)
                writer.write(data)
                await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()


def server_tls(certfile: Path, keyfile: Path, client_ca: Path | None = None) -> ssl.SSLContext:
    """A server-side TLS context; with ``client_ca`` it demands a client certificate."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certfile, keyfile)
    if client_ca is not None:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(client_ca)
    return context


class TLSProxy(ByteProxy):
    """TLS termination in front of a plaintext loopback server, as a load balancer or stunnel
    does in production: clients speak TLS to ``port`` (verifying ``certfile`` against their CA),
    the server behind sees plain TCP. Lets the real broker and Redis test the daemon's TLS
    clients (the bundled tansu's own TLS listener never completes a handshake)."""

    def __init__(
        self, target_port: int, certfile: Path, keyfile: Path, client_ca: Path | None = None
    ) -> None:
        """``client_ca``: require a client certificate signed by it (mutual TLS)."""
        super().__init__(target_port, server_tls(certfile, keyfile, client_ca))
