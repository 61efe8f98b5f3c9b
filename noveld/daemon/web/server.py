"""The web view's HTTP server: the page (``/``), its static files (``/static/…``) and the JSON
API (``/api/stories``, ``/api/births``, ``/api/status``), read-only.

Only GET and HEAD are answered (any other method: 405). With a token, the page and the API
ask for ``Authorization: Bearer <token>`` or the session cookie that ``/?token=<token>`` sets
(then redirects to ``/``, so the token leaves the address bar and the history); the static
files hold no data and are served to anyone.
The page is static and fills itself with ``textContent`` only; the Content-Security-Policy lets
it run no script but its own, so a document's text can never become markup or code.
"""

from __future__ import annotations

import hmac
import json
import logging
import socket
import threading
from http.cookies import CookieError, SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

from noveld.daemon.web.feed import Cached, FeedUnavailable, StoryFeed

log = logging.getLogger("noveld.web")

COOKIE = "noveld_ui_token"
"""The session cookie ``/?token=`` sets."""

MAX_LIMIT = 200
"""Most stories or births one API call returns."""

_STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/static/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/static/style.css": ("style.css", "text/css; charset=utf-8"),
}
_PUBLIC = {"/static/app.js", "/static/style.css"}  # no data in them: no token asked

_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


def _same(offered: str, secret: bytes) -> bool:
    """Whether ``offered`` is the token, in time independent of where they differ."""
    return hmac.compare_digest(offered.encode("utf-8", "replace"), secret)


def _session_cookie(token: str) -> str:
    """The Set-Cookie value that carries the token for the browser's session."""
    cookie: SimpleCookie = SimpleCookie()
    cookie[COOKIE] = token
    cookie[COOKIE]["httponly"] = True
    cookie[COOKIE]["samesite"] = "Strict"
    cookie[COOKIE]["path"] = "/"
    return cookie[COOKIE].OutputString()


def _asset(name: str) -> bytes:
    return resources.files("noveld.daemon.web").joinpath("static", name).read_bytes()


class _Server(ThreadingHTTPServer):
    daemon_threads = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class ViewServer:
    """The view on ``host:port`` (port 0: any free one), served from a daemon thread."""

    def __init__(
        self, feed: StoryFeed, host: str, port: int, token: str | None, ttl_s: float = 1.0
    ) -> None:
        cached = Cached(feed, ttl_s)
        assets = {path: (_asset(name), ctype) for path, (name, ctype) in _STATIC.items()}
        secret = None if token is None else token.encode("utf-8")

        class Handler(BaseHTTPRequestHandler):
            server_version = "noveld-ui"
            sys_version = ""

            def log_message(self, format: str, *args: Any) -> None:  # no access log
                pass

            def do_GET(self) -> None:
                self._answer(body=True)

            def do_HEAD(self) -> None:
                self._answer(body=False)

            def _refuse_method(self) -> None:
                self._send(405, b"only GET and HEAD: the view is read-only\n", "text/plain",
                           True, {"Allow": "GET, HEAD"})  # fmt: skip

            do_POST = do_PUT = do_DELETE = do_PATCH = _refuse_method
            do_OPTIONS = do_TRACE = do_CONNECT = _refuse_method

            def _authorized(self, path: str) -> bool:
                if secret is None or path in _PUBLIC:
                    return True
                given = self.headers.get("Authorization", "")
                if given.startswith("Bearer "):
                    return _same(given[len("Bearer ") :].strip(), secret)
                cookie = SimpleCookie()
                try:
                    cookie.load(self.headers.get("Cookie", ""))
                except CookieError:
                    return False
                morsel = cookie.get(COOKIE)
                return morsel is not None and _same(morsel.value, secret)

            def _answer(self, body: bool) -> None:
                url = urlsplit(self.path)
                path, query = url.path, parse_qs(url.query)
                if secret is not None and path == "/" and "token" in query:
                    if _same(query["token"][0], secret):  # once: a cookie, then the bare page
                        self._send(303, b"", "text/plain", body, {
                            "Location": "/", "Set-Cookie": _session_cookie(query["token"][0])
                        })  # fmt: skip
                        return
                    authorized = False
                else:
                    authorized = self._authorized(path)
                if not authorized:
                    self._send(
                        401,
                        b"this view needs its token: open /?token=TOKEN in a browser, or send "
                        b"'Authorization: Bearer TOKEN'\n",
                        "text/plain",
                        body,
                        {"WWW-Authenticate": 'Bearer realm="noveld"'},
                    )
                    return
                if path in assets:
                    data, ctype = assets[path]
                    self._send(200, data, ctype, body, {"Cache-Control": "no-cache"})
                    return
                if path.startswith("/api/"):
                    self._api(path[len("/api/") :], query, body)
                    return
                if path == "/favicon.ico":  # asked by every browser: no icon, no error
                    self._send(204, b"", "image/x-icon", body)
                    return
                self._send(404, b"not found\n", "text/plain", body)

            def _api(self, what: str, query: dict[str, list[str]], body: bool) -> None:
                try:
                    limit = max(1, min(MAX_LIMIT, int(query.get("limit", ["50"])[0])))
                except ValueError:
                    self._json(400, {"error": "limit must be a whole number"}, body)
                    return
                try:
                    if what == "stories":
                        data: Any = {"stories": cached.stories(limit)}
                    elif what == "births":
                        data = {"births": cached.births(limit)}
                    elif what == "status":
                        data = cached.status()
                    else:
                        self._json(404, {"error": f"no API {what!r}"}, body)
                        return
                except FeedUnavailable as exc:
                    self._json(503, {"error": str(exc)}, body)
                    return
                except Exception:
                    log.exception("the web view could not answer /api/%s", what)
                    self._json(500, {"error": "internal error (see the server's log)"}, body)
                    return
                self._json(200, data, body)

            def _json(self, code: int, data: Any, body: bool) -> None:
                raw = json.dumps(data, ensure_ascii=False, allow_nan=False).encode("utf-8")
                self._send(code, raw, "application/json", body, {"Cache-Control": "no-store"})

            def _send(
                self,
                code: int,
                data: bytes,
                ctype: str,
                body: bool,
                extra: dict[str, str] | None = None,
            ) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                for k, v in {**_HEADERS, **(extra or {})}.items():
                    self.send_header(k, v)
                self.end_headers()
                if body:
                    self.wfile.write(data)

        self.httpd = (_Server6 if ":" in host else _Server)((host, port), Handler)
        self.host = host
        self.port = int(self.httpd.server_address[1])
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, name="noveld-ui", daemon=True
        )

    @property
    def url(self) -> str:
        """The view's address (as a browser on this host reaches it)."""
        host = {"0.0.0.0": "127.0.0.1", "::": "[::1]"}.get(self.host, self.host)
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"http://{host}:{self.port}/"

    def start(self) -> ViewServer:
        """Serve in a daemon thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Shut the server down."""
        self.httpd.shutdown()
        self.httpd.server_close()
