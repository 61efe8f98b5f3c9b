"""A Kafka SASL gateway (PLAIN, SCRAM-SHA-256/512) in front of the broker, optionally over TLS:
the bundled broker cannot hold a SASL user, so successful logins are tested through this."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import os
import struct
import uuid
from pathlib import Path

from servers.proxies import ByteProxy, server_tls


class _ScramServer:
    """The server side of one SCRAM-SHA-256/512 exchange (RFC 5802, no channel binding)."""

    ITERATIONS = 4096

    def __init__(self, mechanism: str, users: dict[str, str]) -> None:
        self.digest = "sha256" if mechanism.endswith("256") else "sha512"
        self.users = users
        self.user: str | None = None
        self._first: tuple[str, str, str, bytes] | None = None  # bare, server-first, nonce, salt

    def step(self, message: bytes) -> tuple[bytes, bool | None]:
        """The reply to a client message, and True/False once the login succeeded/failed."""
        text = message.decode()
        if self._first is None:  # client-first: "n,,n=user,r=nonce"
            bare = text.split(",", 2)[2]
            attrs = dict(p.split("=", 1) for p in bare.split(","))
            self.user = attrs["n"]
            nonce, salt = attrs["r"] + uuid.uuid4().hex, os.urandom(16)
            server_first = f"r={nonce},s={base64.b64encode(salt).decode()},i={self.ITERATIONS}"
            self._first = (bare, server_first, nonce, salt)
            return server_first.encode(), None
        bare, server_first, nonce, salt = self._first
        without_proof, proof = text.rsplit(",p=", 1)  # client-final
        password = self.users.get(self.user or "")
        echoed = dict(p.split("=", 1) for p in without_proof.split(",")).get("r")
        if password is None or echoed != nonce:
            return b"", False
        d = self.digest
        salted = hashlib.pbkdf2_hmac(d, password.encode(), salt, self.ITERATIONS)
        client_key = hmac.new(salted, b"Client Key", d).digest()
        auth_message = f"{bare},{server_first},{without_proof}".encode()
        signature = hmac.new(hashlib.new(d, client_key).digest(), auth_message, d).digest()
        expected = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        if not hmac.compare_digest(expected, base64.b64decode(proof)):
            return b"", False
        server_key = hmac.new(salted, b"Server Key", d).digest()
        return b"v=" + base64.b64encode(hmac.new(server_key, auth_message, d).digest()), True


def _uvarint(buf: bytes, at: int) -> tuple[int, int]:
    """An unsigned varint of Kafka's flexible versions at ``at``: (value, next offset)."""
    value = shift = 0
    while True:
        b = buf[at]
        at += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, at
        shift += 7


def _put_uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class KafkaSASLProxy(ByteProxy):
    """SASL in front of a broker that has none, as a Kafka gateway does: a client must log in
    (``SaslHandshake`` v0–1, then ``SaslAuthenticate`` v0–2 with PLAIN or SCRAM-SHA-256/512)
    as one of ``users`` before anything is forwarded; ``ApiVersions`` is answered by the broker
    before the login, as a broker does. TLS on the listener too with ``certfile``/``keyfile``
    (SASL_SSL). Lets the real broker test a *successful* SASL login, which the bundled tansu
    cannot: it has no way to hold a SCRAM user."""

    API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
    MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    UNSUPPORTED_SASL_MECHANISM, SASL_AUTHENTICATION_FAILED = 33, 58

    def __init__(
        self,
        target_port: int,
        users: dict[str, str],
        certfile: Path | None = None,
        keyfile: Path | None = None,
    ) -> None:
        tls = server_tls(certfile, keyfile) if certfile and keyfile else None
        super().__init__(target_port, tls)
        self.users = users
        self.logins: list[tuple[str, str]] = []  # (mechanism, user) of each successful login
        self.refused = 0  # connections refused: unknown user, wrong password, no login

    @staticmethod
    async def _frame(reader: asyncio.StreamReader) -> bytes:
        return await reader.readexactly(int.from_bytes(await reader.readexactly(4), "big"))

    @staticmethod
    def _send(writer: asyncio.StreamWriter, payload: bytes) -> None:
        writer.write(len(payload).to_bytes(4, "big") + payload)

    @staticmethod
    def _string(value: str | None, compact: bool) -> bytes:
        if value is None:
            return b"\x00" if compact else struct.pack(">h", -1)
        raw = value.encode()
        return (_put_uvarint(len(raw) + 1) if compact else struct.pack(">h", len(raw))) + raw

    def _authenticate_reply(
        self, version: int, corr: int, error: int, message: str | None, data: bytes
    ) -> bytes:
        """A ``SaslAuthenticate`` response (v2 is a flexible version: compact fields, tags)."""
        flexible = version >= 2
        out = struct.pack(">i", corr) + (b"\x00" if flexible else b"")
        out += struct.pack(">h", error) + self._string(message, flexible)
        out += (_put_uvarint(len(data) + 1) if flexible else struct.pack(">i", len(data))) + data
        if version >= 1:
            out += struct.pack(">q", 0)  # session lifetime: no re-authentication
        return out + (b"\x00" if flexible else b"")

    def _check(
        self, mechanism: str, scram: _ScramServer | None, token: bytes
    ) -> tuple[bytes, bool | None]:
        if mechanism == "PLAIN":  # "authzid \0 user \0 password"
            _, user, password = token.decode().split("\x00")
            ok = self.users.get(user) == password
            if ok:
                self.logins.append((mechanism, user))
            return b"", ok
        assert scram is not None
        reply, outcome = scram.step(token)
        if outcome:
            self.logins.append((mechanism, scram.user or ""))
        return reply, outcome

    async def _admit(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_reader: asyncio.StreamReader,
        up_writer: asyncio.StreamWriter,
    ) -> bool:
        """Serve the client's requests until it logged in (True) or failed to (False)."""
        mechanism: str | None = None
        scram: _ScramServer | None = None
        while True:
            frame = await self._frame(reader)
            key, version, corr, n = struct.unpack(">hhih", frame[:10])
            at = 10 + max(n, 0)  # the body, after the client id (a nullable, non-compact string)
            if key == self.API_VERSIONS:
                self._send(up_writer, frame)
                await up_writer.drain()
                self._send(writer, await self._frame(up_reader))
            elif key == self.SASL_HANDSHAKE and mechanism is None:
                size = struct.unpack(">h", frame[at : at + 2])[0]
                asked = frame[at + 2 : at + 2 + size].decode()
                known = asked in self.MECHANISMS
                names = b"".join(self._string(m, False) for m in self.MECHANISMS)
                error = 0 if known else self.UNSUPPORTED_SASL_MECHANISM
                body = struct.pack(">hi", error, len(self.MECHANISMS)) + names
                self._send(writer, struct.pack(">i", corr) + body)
                if not known:
                    break
                mechanism = asked
                scram = None if asked == "PLAIN" else _ScramServer(asked, self.users)
            elif key == self.SASL_AUTHENTICATE and mechanism is not None:
                if version >= 2:  # skip the header's tagged fields; compact bytes
                    _tags, at = _uvarint(frame, at)
                    size, at = _uvarint(frame, at)
                    token = frame[at : at + size - 1]
                else:
                    size = struct.unpack(">i", frame[at : at + 4])[0]
                    token = frame[at + 4 : at + 4 + size]
                reply, outcome = self._check(mechanism, scram, token)
                if outcome is False:
                    failed = self.SASL_AUTHENTICATION_FAILED
                    self._send(
                        writer,
                        self._authenticate_reply(
                            version, corr, failed, "Authentication failed", b""
                        ),
                    )
                    break
                self._send(writer, self._authenticate_reply(version, corr, 0, None, reply))
                if outcome:
                    await writer.drain()
                    return True
            else:  # any other request before a login: the broker closes the connection
                break
            await writer.drain()
        await writer.drain()
        self.refused += 1
        return False
