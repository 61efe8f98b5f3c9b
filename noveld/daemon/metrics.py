"""Prometheus metrics and health endpoints.

One HTTP server on ``--metrics-port`` serves ``/metrics`` (prometheus_client's exposition: the
text format or OpenMetrics, gzip when asked), ``/healthz`` (the batch loop turned recently) and
``/readyz`` (state loaded, input attached). Labels are bounded: never a cluster or document id.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from http.server import ThreadingHTTPServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import MetricsHandler

from noveld import __version__
from noveld.daemon.pipeline import BatchReport
from noveld.schema import InvalidReason

STAGES = ("decode", "featurize", "model", "commit", "publish")


class Metrics:
    """All noveld metrics in a private registry, updated once per batch."""

    def __init__(self, model: str, clock: Callable[[], float] = time.monotonic) -> None:
        r = self.registry = CollectorRegistry()
        self._clock = clock
        self.last_turn = clock()
        self.ready = False
        self.unready_why = "starting"  # what /readyz says while not ready
        self.documents = Counter(
            "noveld_documents", "Documents by outcome", ["outcome"], registry=r
        )
        self.batches = Counter("noveld_batches", "Batches processed", registry=r)
        self.truncated = Counter(
            "noveld_documents_truncated",
            "Documents cut to limits.max_doc_tokens tokens (limits.oversize = truncate)",
            registry=r,
        )
        self.batch_duration = Histogram(
            "noveld_batch_duration_seconds",
            "Time of one batch: the sum of its stages",
            registry=r,
            # up to 30 s: the first batches include numba's compilation (~2 s), and a p99 that
            # saturates at the top bucket hides how slow the slow batches are
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.stage_duration = Histogram(
            "noveld_stage_duration_seconds",
            "Wall time of one batch stage",
            ["stage"],
            registry=r,
            buckets=(0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5, 30),
        )
        self.clusters_active = Gauge("noveld_clusters_active", "Live clusters", registry=r)
        self.vocabulary = Gauge(
            "noveld_vocabulary_entries",
            "Entries of the namespace's vocabulary (it grows with the stream's distinct words)",
            registry=r,
        )
        self.compactions = Counter(
            "noveld_vocabulary_compactions",
            "Vocabulary compactions this process made (word ids renumbered over the words in use)",
            registry=r,
        )
        self.stale = Counter(
            "noveld_stale_vocabulary_reloads",
            "Batches refused and read again because another replica compacted the vocabulary",
            registry=r,
        )
        self.born = Counter("noveld_clusters_born", "Clusters opened by the model", registry=r)
        self.retired = Counter("noveld_clusters_retired", "Clusters retired", registry=r)
        self.merged = Counter("noveld_clusters_merged", "Clusters merged", registry=r)
        self.novelty_events = Counter(
            "noveld_novelty_events", "cluster.born events committed", registry=r
        )
        self.lag = Gauge(
            "noveld_consumer_lag_messages",
            "Messages behind the partition end",
            ["topic", "partition"],
            registry=r,
        )
        self._lag_keys: set[str] = set()
        self.last_lag: dict[str, int] | None = None  # per topic:partition, once known
        self.dlq = Counter("noveld_dlq_messages", "Dead letters by reason", ["reason"], registry=r)
        for (
            reason
        ) in InvalidReason:  # every series from the start: dashboards show 0, not "No data"
            self.dlq.labels(reason=str(reason))
        self.replayed = Counter(
            "noveld_replayed_batches", "Batches recognised as replays", registry=r
        )
        self.fenced = Counter("noveld_fenced_commits", "Commits refused by fencing", registry=r)
        self.outbox = Gauge("noveld_outbox_pending_events", "Events not yet delivered", registry=r)
        self.refused = Counter(
            "noveld_events_refused",
            "Events dropped because the broker can never take them (too large)",
            registry=r,
        )
        self._refused_seen = 0
        self.held = Gauge(
            "noveld_events_held_for_replicas",
            "1 while events wait for Redis replicas to acknowledge their commits",
            registry=r,
        )
        self.last_commit = Gauge(
            "noveld_last_commit_timestamp_seconds",
            "Unix time of the last state commit (the process's start until its first)",
            registry=r,
        )
        # not 0 (1970): "seconds since the last commit" read 1.8e9 and NoveldStalled fired at
        # every start; from the start, a daemon that never commits alerts after the same 5 min
        self.last_commit_time = time.time()
        self.last_commit.set(self.last_commit_time)
        self.log_pred = Gauge(
            "noveld_log_predictive_per_token",
            "Log predictive probability per token of the last batch",
            registry=r,
        )
        self.log_pred.set(float("nan"))  # no batch yet (0 would mean probability 1)
        self._kafka: tuple[Gauge, Gauge] | None = None  # Kafka mode's gauges, made on first use
        build = Gauge("noveld_build_info", "Build information", ["version", "model"], registry=r)
        build.labels(version=__version__, model=model).set(1)
        for outcome in ("assigned", "born", "invalid", "replayed"):
            self.documents.labels(outcome=outcome)
        for stage in STAGES:
            self.stage_duration.labels(stage=stage)

    def turn(self) -> None:
        """The loop is alive (called every iteration, idle or not)."""
        self.last_turn = self._clock()

    def observe(self, rep: BatchReport) -> None:
        """Fold one batch report in."""
        self.turn()
        self.batches.inc()
        if rep.replayed:
            self.replayed.inc()
            self.documents.labels(outcome="replayed").inc(rep.valid)
        else:
            self.documents.labels(outcome="born").inc(rep.model_births)
            self.documents.labels(outcome="assigned").inc(rep.valid - rep.model_births)
            self.last_commit_time = time.time()
            self.last_commit.set(self.last_commit_time)
        self.documents.labels(outcome="invalid").inc(rep.invalid)
        self.truncated.inc(rep.truncated)
        for reason, n in rep.invalid_reasons.items():
            self.dlq.labels(reason=reason).inc(n)
        self.batch_duration.observe(sum(rep.stage_seconds.values()))
        for stage, sec in rep.stage_seconds.items():
            self.stage_duration.labels(stage=stage).observe(sec)
        self.clusters_active.set(rep.clusters_active)
        self.vocabulary.set(rep.vocabulary)
        if rep.vocabulary_compacted:
            self.compactions.inc()
        self.set_outbox(rep.outbox_pending, rep.held_for_replicas, rep.events_refused)
        self.born.inc(rep.model_births)
        self.retired.inc(rep.retired)
        self.merged.inc(rep.merged)
        self.novelty_events.inc(rep.births)
        if rep.log_predictive_per_token == rep.log_predictive_per_token:  # not NaN
            self.log_pred.set(rep.log_predictive_per_token)

    def set_outbox(self, pending: int, held_for_replicas: bool, refused_total: int = 0) -> None:
        """Events not yet delivered, whether they wait for the Redis replicas, and how many the
        process has dropped as undeliverable since it started (``refused_total``)."""
        self.outbox.set(pending)
        self.held.set(1 if held_for_replicas else 0)
        if refused_total > self._refused_seen:
            self.refused.inc(refused_total - self._refused_seen)
            self._refused_seen = refused_total

    def set_kafka(self, reachable: bool, held: int) -> None:
        """Kafka mode: whether the brokers answered the last end-offsets request, and how many
        assigned partitions are held (stored offset past the log end: not read, and their lag
        is 0, so neither the lag nor the commit time shows them)."""
        if self._kafka is None:
            self._kafka = (
                Gauge(
                    "noveld_kafka_reachable",
                    "1 while the Kafka brokers answer (the consumer lag's end-offsets request)",
                    registry=self.registry,
                ),
                Gauge(
                    "noveld_partitions_held",
                    "Assigned partitions not read: their stored offset is past the log end",
                    registry=self.registry,
                ),
            )
        self._kafka[0].set(1 if reachable else 0)
        self._kafka[1].set(held)

    def set_lag(self, lag: dict[str, int]) -> None:
        """Consumer lag per ``topic:partition`` of the partitions this replica owns; the series
        of partitions it no longer owns are removed (another replica reports them now, and a
        stale copy would be summed twice by the lag alert)."""
        for key in self._lag_keys - lag.keys():
            topic, part = key.rsplit(":", 1)
            with contextlib.suppress(KeyError):
                self.lag.remove(topic, part)
        for key, n in lag.items():
            topic, part = key.rsplit(":", 1)
            self.lag.labels(topic=topic, partition=part).set(n)
        self._lag_keys = set(lag)
        self.last_lag = dict(lag)

    def healthy(self, max_idle_s: float = 60.0) -> bool:
        """The loop turned within ``max_idle_s``."""
        return self._clock() - self.last_turn <= max_idle_s

    def set_ready(self, ready: bool, why: str = "") -> None:
        """Ready or not, and why not (the body of a 503 from /readyz)."""
        self.ready = ready
        self.unready_why = "" if ready else why

    def readiness(self) -> tuple[int, bytes]:
        """/readyz: 200 "ready", or 503 "not ready: <why>"."""
        if not self.healthy():
            why = f"the batch loop has not turned for {self._clock() - self.last_turn:.0f} s"
        elif not self.ready:
            why = self.unready_why or "not ready"
        else:
            return 200, b"ready\n"
        return 503, f"not ready: {why}\n".encode()


class MetricsServer:
    """Background HTTP server for /metrics, /healthz, /readyz."""

    def __init__(self, metrics: Metrics, port: int, host: str = "0.0.0.0") -> None:
        outer = metrics

        class Handler(MetricsHandler):
            """/metrics is prometheus_client's own handler (the text format or OpenMetrics by
            the Accept header, gzip when accepted); the two probes answer beside it."""

            registry = outer.registry

            def do_GET(self) -> None:
                if self.path == "/metrics":
                    super().do_GET()
                elif self.path == "/healthz":
                    ok = outer.healthy()
                    self._reply(200 if ok else 503, b"ok\n" if ok else b"loop stalled\n")
                elif self.path == "/readyz":
                    self._reply(*outer.readiness())
                else:
                    self._reply(404, b"not found\n")

            def _reply(self, code: int, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.port = int(self.httpd.server_address[1])
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, name="noveld-metrics", daemon=True
        )

    def start(self) -> MetricsServer:
        """Serve in a daemon thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Shut the server down."""
        self.httpd.shutdown()
        self.httpd.server_close()
