"""``noveld ui``: the read-only web view of a namespace whose daemon runs elsewhere (or is
stopped), from its state dir or its Redis. It never writes the state and takes no lock, so it
runs beside the daemon that owns the namespace."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from noveld.daemon.errors import UserError
from noveld.daemon.flags import Flag, add_entries, flag, overrides
from noveld.daemon.settings import Settings, load_settings
from noveld.daemon.signals import graceful_stop
from noveld.state.redis_url import redacted

DEFAULT_PORT = 9109
"""``noveld ui``'s port when neither ``--port`` nor ``ui.port`` is given."""

UI_FLAGS: tuple[Flag, ...] = (
    flag("--state-dir", setting="state.dir", type=Path, help="the daemon's --state-dir"),
    flag("--redis-url", setting="redis.url", help="the Redis holding the namespace"),
    flag(
        "--namespace",
        setting="namespace",
        help="the namespace to show (default: NOVELD_NAMESPACE, --config, default)",
    ),
    flag(
        "--bind",
        setting="ui.bind",
        metavar="ADDR",
        help="address to listen on (default 127.0.0.1, this host only; 0.0.0.0 or :: for "
        "every interface: then set a token)",
    ),
    flag(
        "--port",
        setting="ui.port",
        type=int,
        help=f"port to listen on (default {DEFAULT_PORT}; 0 = any free, printed at start)",
    ),
    flag(
        "--token-file",
        setting="ui.token_file",
        type=Path,
        metavar="FILE",
        help="ask for the bearer token on FILE's first line (or set NOVELD_UI__TOKEN); "
        "a browser opens /?token=TOKEN once",
    ),
)

DESCRIPTION = (
    "Serve the read-only web view of live stories (the page at / and JSON at /api/stories, "
    "/api/births, /api/status) for a namespace whose daemon runs elsewhere: from its state "
    "dir (the snapshot, read again each time the daemon replaces it) or from Redis. It never "
    "writes the state, so it runs beside the daemon. A daemon serves the same view itself "
    "with `noveld run --ui-port N`. The page refreshes itself every few seconds; Ctrl-C stops "
    'the server (docs/operations.md, "The web view").'
)


def add_ui_command(sub: Any) -> None:
    """Register ``noveld ui``."""
    p = sub.add_parser(
        "ui", help="serve the read-only web view of a namespace's live stories",
        description=DESCRIPTION,
    )  # fmt: skip
    p.add_argument("--config", type=Path, help="TOML config file (as the daemon's)")
    add_entries(p, UI_FLAGS)
    p.set_defaults(func=cmd_ui)


def ui_settings(ns: argparse.Namespace) -> Settings:
    """The settings of ``noveld ui``: the config file and environment, then the flags."""
    return load_settings(ns.config, overrides(ns, UI_FLAGS))


def cmd_ui(ns: argparse.Namespace) -> int:
    """Serve the view until SIGINT or SIGTERM."""
    from noveld.daemon.web.start import serve_view
    from noveld.daemon.web.state_feed import redis_feed, state_dir_feed

    settings = ui_settings(ns)
    state_dir, url = settings.state.dir, settings.redis.url
    if ns.state_dir is not None and ns.redis_url is not None:
        raise UserError("give --state-dir DIR or --redis-url URL, not both")
    if ns.state_dir is not None:
        url = None
    elif ns.redis_url is not None:
        state_dir = None
    if state_dir is None and url is None:
        raise UserError(
            "noveld ui needs --state-dir DIR or --redis-url URL (or state.dir, redis.url in "
            "--config or the environment: NOVELD_STATE__DIR, NOVELD_REDIS__URL)"
        )
    if state_dir is not None:
        if not state_dir.is_dir():
            what = "is not a directory" if state_dir.exists() else "does not exist"
            raise UserError(f"--state-dir {state_dir} {what}")
        feed = state_dir_feed(state_dir, settings.namespace)
        where = str(state_dir)
    else:
        assert url is not None
        from noveld.daemon.startup import default_store

        store = default_store(settings)
        feed = redis_feed(store, settings.namespace)
        where = f"namespace {settings.namespace!r} at {redacted(url.get_secret_value())}"
        if not store.has_state():  # type: ignore[attr-defined]
            sys.stderr.write(f"noveld: warning: {where} has no state yet; the view waits\n")
    port = DEFAULT_PORT if settings.ui.port is None else settings.ui.port
    with graceful_stop() as stop:
        server = serve_view(feed, settings.ui, port, ttl_s=1.0)
        token = " (token required)" if server_has_token(settings) else ""
        sys.stderr.write(f"noveld: web view of {where} on {server.url}{token}; Ctrl-C stops\n")
        sys.stderr.flush()
        try:
            while not stop.wait(0.5):
                pass
        finally:
            server.stop()
    return 0


def server_has_token(settings: Settings) -> bool:
    """Whether the view asks for a token."""
    return settings.ui.token is not None or settings.ui.token_file is not None
