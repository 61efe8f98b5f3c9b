"""The Redis URLs noveld accepts and their form for logs.

A server or a cluster's configuration endpoint is a redis-py URL (``redis://``, ``rediss://``,
``unix://``). A primary managed by Redis Sentinel is ``redis+sentinel://``: the sentinels to ask,
then the service (master) name, as the sentinels know it::

    redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/service[/db]
                     [?sentinel_username=U&sentinel_password=P]

The credentials before ``@`` are the data nodes'; a sentinel that has its own password
(``requirepass`` in sentinel.conf) gets ``sentinel_password``. Sentinels listen on 26379 unless
a port is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

SENTINEL_SCHEME = "redis+sentinel"
SENTINEL_PORT = 26379
SCHEMES = ("redis", "rediss", "unix", SENTINEL_SCHEME)
_SENTINEL_QUERY = ("sentinel_username", "sentinel_password")


@dataclass(frozen=True)
class SentinelURL:
    """A parsed ``redis+sentinel://`` URL."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_username: str | None = None
    sentinel_password: str | None = None


def scheme_of(url: str) -> str:
    """The URL's scheme, lower case ("" when there is none)."""
    head, sep, _ = url.partition("://")
    return head.lower() if sep else ""


def is_sentinel_url(url: str) -> bool:
    """Whether ``url`` names a Sentinel-managed primary."""
    return scheme_of(url) == SENTINEL_SCHEME


def check_url(url: str) -> None:
    """Raise ``ValueError`` (without the password in the message) for a URL noveld cannot use."""
    scheme = scheme_of(url)
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {', '.join(s + '://' for s in SCHEMES)}")
    if scheme == SENTINEL_SCHEME:
        parse_sentinel_url(url)
    elif scheme in ("redis", "rediss"):
        path = urlsplit(url).path.strip("/")
        if path and not path.isdigit():  # redis-py would quietly use database 0
            raise ValueError(f"the path must be a database number (/0, /1, …), not /{path}")


def parse_sentinel_url(url: str) -> SentinelURL:
    """Split a ``redis+sentinel://`` URL into sentinels, service, database and credentials."""
    if not is_sentinel_url(url):
        raise ValueError(f"not a {SENTINEL_SCHEME}:// URL")
    rest = url.partition("://")[2]
    rest, _, query = rest.partition("?")
    netloc, _, path = rest.partition("/")
    userinfo, at, hosts = netloc.rpartition("@")
    if not at:
        hosts = netloc
    username = password = None
    if userinfo:
        user, colon, secret = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if colon else None
    sentinels = tuple(_host_port(h) for h in hosts.split(","))
    parts = [p for p in path.split("/") if p]
    if not parts:
        raise ValueError("the service name is missing: redis+sentinel://host:port/SERVICE")
    if len(parts) > 2:
        raise ValueError("the path must be /service or /service/db")
    db = 0
    if len(parts) == 2:
        if not parts[1].isdigit():
            raise ValueError(f"the database must be a number, not {parts[1]!r}")
        db = int(parts[1])
    params = parse_qs(query, keep_blank_values=True) if query else {}
    unknown = sorted(set(params) - set(_SENTINEL_QUERY))
    if unknown:
        raise ValueError(f"unknown URL parameter(s) {', '.join(unknown)}")
    return SentinelURL(
        sentinels=sentinels,
        service=unquote(parts[0]),
        db=db,
        username=username,
        password=password,
        sentinel_username=params.get("sentinel_username", [None])[-1] or None,
        sentinel_password=params.get("sentinel_password", [None])[-1] or None,
    )


def _host_port(item: str) -> tuple[str, int]:
    """``host``, ``host:port`` or ``[v6]:port`` → (host, port)."""
    if not item:
        raise ValueError("a sentinel address is empty (hosts are separated by single commas)")
    if item.startswith("["):
        host, bracket, tail = item[1:].partition("]")
        if not bracket or (tail and not tail.startswith(":")):
            raise ValueError(f"bad sentinel address {item!r}")
        port_text = tail[1:]
    else:
        host, colon, port_text = item.rpartition(":")
        if not colon:
            host, port_text = item, ""
    if not host:
        raise ValueError(f"bad sentinel address {item!r}")
    if not port_text:
        return host, SENTINEL_PORT
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"bad sentinel port in {item!r}")
    return host, int(port_text)


def redacted(url: str) -> str:
    """The URL without credentials or query, for logs and error messages; never raises."""
    try:
        if is_sentinel_url(url):
            target = parse_sentinel_url(url)
            hosts = ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in target.sentinels)
            return f"{SENTINEL_SCHEME}://{hosts}/{target.service}/{target.db}"
        parts = urlsplit(url)
        if parts.scheme == "unix":
            return f"unix://{parts.path}"
        return f"{parts.scheme}://{parts.hostname}:{parts.port or 6379}{parts.path}"
    except ValueError:
        return "<a Redis URL that does not parse>"
