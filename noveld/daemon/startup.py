"""What every run builds first: its state store (Redis or in-process) with the start-up
warning it may owe, the metrics server and the web view."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import IO

import redis

from noveld.daemon.errors import UserError
from noveld.daemon.metrics import Metrics, MetricsServer
from noveld.daemon.outage import outage_reason
from noveld.daemon.pipeline import Pipeline
from noveld.daemon.settings import Settings
from noveld.daemon.web.server import ViewServer
from noveld.daemon.web.start import start_daemon_view
from noveld.models.hdp import live_clusters
from noveld.state.base import StateStore
from noveld.state.memory import MemoryStore
from noveld.state.redis.connect import connect
from noveld.state.redis.store import RedisStore
from noveld.state.redis_url import redacted


def refuse_a_file_as_state_dir(state_dir: Path) -> None:
    """:class:`UserError` when ``--state-dir`` names a file (creating the directory failed
    with a bare "[Errno 17] File exists")."""
    if state_dir.exists() and not state_dir.is_dir():
        raise UserError(f"--state-dir {state_dir} is not a directory (a file of that name exists)")


def default_store(settings: Settings, snapshot: bool = True) -> StateStore:
    """RedisStore when ``redis.url`` is set, else the in-process store (+ snapshots)."""
    if settings.redis.url is None:
        store = MemoryStore(
            settings.state.dir if snapshot else None, settings.state.snapshot_interval_s
        )
        try:
            store.check_writable()
        except OSError as exc:
            raise UserError(f"cannot save state in {settings.state.dir}: {exc}") from exc
        return store
    url = settings.redis.url.get_secret_value()
    try:
        client = connect(url, socket_timeout_s=settings.redis.socket_timeout_s)
    except ValueError as exc:
        raise UserError(f"bad Redis URL ({redacted(url)}): {exc}") from exc
    except TypeError as exc:  # a query option redis-py's connections do not take
        raise UserError(f"bad Redis URL ({redacted(url)}): an option it cannot use: {exc}") from exc
    except redis.RedisError as exc:
        raise UserError(f"cannot reach Redis ({redacted(url)}): {exc}") from exc
    shared = RedisStore(
        client,
        settings.namespace,
        replicas_to_ack=settings.redis.replicas_to_ack,
        replica_ack_timeout_ms=settings.redis.replica_ack_timeout_ms,
    )
    try:
        problem = shared.unfit_server()
    except redis.RedisError as exc:
        raise UserError(f"cannot start: {outage_reason(exc)}") from exc
    except (TypeError, ValueError) as exc:  # the URL's query options, met at the first connection
        raise UserError(f"bad Redis URL ({redacted(url)}): an option it cannot use: {exc}") from exc
    if problem is not None:
        raise UserError(f"the Redis at {redacted(url)} cannot hold noveld's state: {problem}")
    return shared


def say_persistence_risk(store: StateStore, out: IO[str] | None) -> None:
    """One start-up line when the namespace's Redis would forget acknowledged commits in a
    crash (:meth:`RedisStore.persistence_risk`); silent for the in-process store."""
    if out is None or not isinstance(store, RedisStore):
        return
    try:
        risk = store.persistence_risk()
    except redis.RedisError:  # the run itself will report an unreachable Redis
        return
    if risk is not None:
        out.write(f"noveld: warning: {risk}\n")
        out.flush()


class Servers:
    """The HTTP servers a run started (metrics, web view), stopped together."""

    def __init__(self, *servers: MetricsServer | ViewServer | None) -> None:
        self.servers = [s for s in servers if s is not None]

    def stop(self) -> None:
        """Shut every server down."""
        for server in self.servers:
            server.stop()


def start_metrics(settings: Settings, pipeline: Pipeline) -> tuple[Metrics | None, Servers | None]:
    """Metrics and their HTTP server when ``metrics_port`` is set (0 = any free port), and
    the web view when ``ui.port`` is (its metrics, not served then, give it the lag)."""
    if settings.metrics_port is None and settings.ui.port is None:
        return None, None
    metrics = Metrics(pipeline.model.kind)
    metrics.clusters_active.set(live_clusters(pipeline.state.stats))
    metrics.vocabulary.set(len(pipeline.state.vocab))
    server = None
    if settings.metrics_port is not None:
        try:
            server = MetricsServer(metrics, settings.metrics_port).start()
        except OSError as exc:
            raise UserError(f"cannot serve metrics on port {settings.metrics_port}: {exc}") from exc
        if settings.metrics_port == 0:  # the port picked is the operator's to know
            sys.stderr.write(
                f"noveld: metrics on port {server.port} (/metrics, /healthz, /readyz)\n"
            )
    try:
        view = start_daemon_view(settings, pipeline, metrics)
    except BaseException:
        if server is not None:
            server.stop()
        raise
    if view is not None:
        sys.stderr.write(f"noveld: web view on {view.url}\n")
    metrics.set_ready(True)
    return metrics, Servers(server, view)
