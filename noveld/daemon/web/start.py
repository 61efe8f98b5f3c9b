"""Starting the web view: its token from the settings, and the daemon's own view of its
pipeline (``ui.port``)."""

from __future__ import annotations

from noveld.daemon.errors import UserError
from noveld.daemon.metrics import Metrics
from noveld.daemon.pipeline import Pipeline
from noveld.daemon.settings import Settings, UiSettings
from noveld.daemon.web.feed import StoryFeed
from noveld.daemon.web.live_feed import PipelineFeed
from noveld.daemon.web.server import ViewServer


def view_token(ui: UiSettings) -> str | None:
    """The bearer token the view asks for (``ui.token``, or the first line of
    ``ui.token_file``), None for none; :class:`UserError` for an unreadable or empty file."""
    if ui.token is not None:
        return ui.token.get_secret_value().strip()
    if ui.token_file is None:
        return None
    try:
        text = ui.token_file.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read the view's token file {ui.token_file}: {exc}") from exc
    lines = text.splitlines()
    token = lines[0].strip() if lines else ""
    if not token:
        raise UserError(f"the view's token file {ui.token_file} is empty (its first line is read)")
    return token


def serve_view(feed: StoryFeed, ui: UiSettings, port: int, ttl_s: float = 1.0) -> ViewServer:
    """Start the view of ``feed`` on ``ui.bind:port``; :class:`UserError` when it cannot listen."""
    token = view_token(ui)
    try:
        return ViewServer(feed, ui.bind, port, token, ttl_s).start()
    except OSError as exc:
        raise UserError(f"cannot serve the web view on {ui.bind}:{port}: {exc}") from exc


def start_daemon_view(
    settings: Settings, pipeline: Pipeline, metrics: Metrics | None
) -> ViewServer | None:
    """The daemon's view of its own pipeline when ``ui.port`` is set."""
    if settings.ui.port is None:
        return None
    return serve_view(PipelineFeed(pipeline, metrics), settings.ui, settings.ui.port)
