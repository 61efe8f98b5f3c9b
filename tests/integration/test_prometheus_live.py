"""The Grafana dashboard and the alert rules run against a real Prometheus scraping a live
Kafka-mode daemon: every panel query and every alert expression parses and returns series,
the rules load and evaluate without error, and ``promtool check rules`` passes."""

from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml
from helpers.kafka_runs import create_topics, start_daemon, stop, wait_for_docs
from kafka import KafkaProducer
from servers.ports import free_port
from servers.prometheus_server import PrometheusServer, prometheus_binary
from servers.redis_server import RedisServer

from noveld.daemon.metrics import Metrics, MetricsServer
from noveld.synth import SynthConfig, generate

pytestmark = [pytest.mark.integration, pytest.mark.slow]
DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
DASHBOARD = DEPLOY / "grafana" / "noveld.json"
ALERTS = DEPLOY / "prometheus" / "alerts.yml"
RULE = DEPLOY / "k8s" / "prometheusrule.yaml"
JOB = "noveld"  # the compose file's job name; NoveldDown selects job=~"noveld.*"
COMPARISON = re.compile(r"(?<=\s)(==|!=|>=|<=|>|<)(?=\s)(?!\s+bool\b)")
METRIC = re.compile(r"\bnoveld_[a-z_]+")


def panel_queries() -> list[tuple[str, str]]:
    """(panel title and refId, expr) of every dashboard query."""
    dash = json.loads(DASHBOARD.read_text())
    return [
        (f"{p['title']} [{t['refId']}]", t["expr"])
        for p in dash["panels"]
        for t in p.get("targets", [])
    ]


def template_queries() -> list[tuple[str, str, str]]:
    """(variable, selector, label) of the dashboard's ``label_values(selector, label)``."""
    dash = json.loads(DASHBOARD.read_text())
    out = []
    for var in dash["templating"]["list"]:
        if var["type"] == "query":
            m = re.fullmatch(r"label_values\((.+), (\w+)\)", var["definition"])
            assert m, var["definition"]
            out.append((var["name"], m.group(1), m.group(2)))
    return out


def grafana_to_promql(expr: str, instance: str) -> str:
    """The query Grafana sends with Job and Replica set to this daemon's scrape, and the
    ``$__rate_interval`` Grafana picks for its default 15 s scrape interval (4 scrapes)."""
    out = (
        expr.replace("$__rate_interval", "1m")
        .replace("$__interval", "1s")
        .replace("$job", JOB)
        .replace("$instance", instance)
    )
    assert "$" not in out, f"a Grafana variable this test does not know: {out}"
    return out


def alert_rules() -> list[dict[str, Any]]:
    return [r for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]]


def as_series_query(expr: str) -> str:
    """An alert expression that returns its series whatever their values: each comparison
    with ``bool`` (0 or 1 instead of dropping the series), and ``absent(x)`` as ``x``. A
    healthy daemon trips no alert, so the expressions as written return nothing; this form
    shows that the metrics and the label matching (``on (instance)``) behind them are live."""
    m = re.fullmatch(r"absent\((.+)\)", expr.strip())
    inner = m.group(1) if m else expr
    return COMPARISON.sub(r"\1 bool", inner)


# What the fixture waits for before the tests query: the daemon scraped, its Kafka gauges and
# lag set (at its first look at the brokers), and batches counted while Prometheus watched.
SCRAPED = (
    "noveld_kafka_reachable",
    "noveld_partitions_held",
    "noveld_consumer_lag_messages",
    "increase(noveld_batches_total[1m]) > 0",
)


def wait_for(prom: PrometheusServer, proc: Any, queries: tuple[str, ...], timeout: float) -> None:
    """Until each query returns a series; fails early if the daemon (``proc``) exits."""
    deadline = time.monotonic() + timeout
    while not all(prom.query(q) for q in queries):
        assert proc is None or proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, [(q, prom.query(q)) for q in queries]
        time.sleep(0.5)


def test_as_series_query_keeps_the_expression_and_drops_only_the_filtering() -> None:
    assert as_series_query("max(x) > 1000") == "max(x) > bool 1000"
    assert as_series_query('absent(up{job=~"n.*"} == 1)') == 'up{job=~"n.*"} == bool 1'
    assert as_series_query("a > 300 and on (i) b > 0") == "a > bool 300 and on (i) b > bool 0"
    assert as_series_query("x > bool 1") == "x > bool 1"


def test_promtool_accepts_the_alert_rules(tmp_path: Path) -> None:
    """``promtool check rules`` on alerts.yml, and on the PrometheusRule's groups (the same
    rules: the two files must not drift apart)."""
    promtool = prometheus_binary("promtool")
    k8s = yaml.safe_load(RULE.read_text())
    assert k8s["spec"]["groups"] == yaml.safe_load(ALERTS.read_text())["groups"]
    spec = tmp_path / "prometheusrule-spec.yml"
    spec.write_text(yaml.safe_dump(k8s["spec"]))
    n = len(alert_rules())
    for path in (ALERTS, spec):
        done = subprocess.run(
            [promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"SUCCESS: {n} rules found" in done.stdout, done.stdout


def test_a_refused_event_fires_its_alert() -> None:
    """One refused (dropped) event fires ``NoveldEventsRefused`` at once. The daemon's own
    ``Metrics`` behind its metrics server, in process: no document makes an event past the
    producer's 1 MiB limit (``top_terms`` are cut short), so the count is set as the
    pipeline sets it after the sink refuses one."""
    refused = [r for r in alert_rules() if "noveld_events_refused_total" in r["expr"]]
    assert [r["alert"] for r in refused] == ["NoveldEventsRefused"]
    metrics = Metrics("dpmm")
    server = MetricsServer(metrics, free_port(), host="127.0.0.1").start()
    instance = f"127.0.0.1:{server.port}"
    try:
        with PrometheusServer([instance], job=JOB, rule_files=[ALERTS]) as prom:
            wait_for(prom, None, ("noveld_events_refused_total",), 60)
            assert not prom.query(refused[0]["expr"])
            metrics.set_outbox(0, False, refused_total=1)
            wait_for(prom, None, (refused[0]["expr"],), 30)
            fired = prom.query(refused[0]["expr"])
            assert [s["metric"]["instance"] for s in fired] == [instance]
            wait_for(prom, None, ('ALERTS{alertname="NoveldEventsRefused"}',), 30)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def live(
    kafka_bootstrap: str, _shared_redis: RedisServer
) -> Iterator[tuple[PrometheusServer, str]]:
    """A Kafka-mode daemon reading a stream that goes on while a Prometheus scrapes it every
    second and evaluates the alert rules; yields the server and the daemon's instance label.
    Module-wide (one daemon for all the tests), so it takes Redis unflushed: its namespace
    is its own."""
    redis_url = _shared_redis.url
    ns = f"p{uuid.uuid4().hex[:6]}"
    topics = create_topics(kafka_bootstrap, ns)
    docs = [json.dumps(d).encode() for d in generate(SynthConfig(n_docs=600, seed=11))]
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    for value in docs[:300]:
        producer.send(topics["in"], value=value)
    producer.send(topics["in"], value=b"{not json")  # a dead letter
    producer.flush()
    port = free_port()
    instance = f"127.0.0.1:{port}"
    client = redis.Redis.from_url(redis_url)
    proc = start_daemon(kafka_bootstrap, redis_url, ns, topics, ("--metrics-port", str(port)))
    try:
        wait_for_docs(client, ns, 301, proc)
        with PrometheusServer([instance], job=JOB, rule_files=[ALERTS]) as prom:
            wait_for(prom, proc, (f'noveld_batches_total{{instance="{instance}"}}',), 60)
            for value in docs[300:]:  # input while Prometheus watches: rates above zero
                producer.send(topics["in"], value=value)
            producer.flush()
            wait_for_docs(client, ns, 601, proc)
            wait_for(prom, proc, SCRAPED, 60)
            yield prom, instance
    finally:
        producer.close()
        stop(proc)


def test_every_dashboard_query_parses_and_returns_series(
    live: tuple[PrometheusServer, str],
) -> None:
    """Each panel's query, filtered to this daemon as Grafana would send it, returns series.
    No sample waits for an event: counters (refused events, stale-vocabulary reloads) are
    exported at 0 from the start, so their rate or increase is a series at 0 until one comes."""
    prom, instance = live
    queries = panel_queries()
    assert len(queries) >= 20
    empty = []
    for where, expr in queries:
        if not prom.query(grafana_to_promql(expr, instance)):
            empty.append(where)
    assert not empty, f"panels without data: {empty}"


def test_the_dashboard_variables_find_the_daemon(live: tuple[PrometheusServer, str]) -> None:
    """Job and Replica (Grafana's ``label_values``) list this scrape's job and instance."""
    prom, instance = live
    expected = {"job": JOB, "instance": instance}
    for name, selector, label in template_queries():
        values = prom.label_values(label, grafana_to_promql(selector, instance))
        assert expected[label] in values, (name, values)


def test_the_dashboard_has_a_panel_for_every_exported_metric(
    live: tuple[PrometheusServer, str],
) -> None:
    """Every series the daemon exports is on a panel (a histogram by its buckets; the
    counters' ``_created`` timestamps are not data)."""
    prom, instance = live
    names = {s["__name__"] for s in prom.series(f'{{instance="{instance}"}}')}
    families = {
        re.sub(r"_(bucket|sum|count)$", "", n)
        for n in names
        if n.startswith("noveld_") and not n.endswith("_created")
    }
    shown = {re.sub(r"_bucket$", "", n) for _, e in panel_queries() for n in METRIC.findall(e)}
    assert len(families) >= 20, families
    assert not families - shown, f"exported, no panel: {sorted(families - shown)}"


def test_every_alert_expression_parses_and_returns_series(
    live: tuple[PrometheusServer, str],
) -> None:
    """As written, each parses and returns nothing (a healthy daemon trips no alert); with its
    comparisons as ``bool`` (see :func:`as_series_query`), each returns series. Refused events
    and held partitions need no staged fault: their series exist at 0 from the first scrape."""
    prom, _ = live
    rules = alert_rules()
    assert len(rules) >= 10
    firing = {r["alert"]: prom.query(r["expr"]) for r in rules}
    assert not any(firing.values()), {k: v for k, v in firing.items() if v}
    empty = [r["alert"] for r in rules if not prom.query(as_series_query(r["expr"]))]
    assert not empty, f"alert expressions over no series: {empty}"


def test_prometheus_loads_and_evaluates_every_alert_rule(
    live: tuple[PrometheusServer, str],
) -> None:
    """The rule file as Prometheus loads it: every rule evaluated, healthy, inactive."""
    prom, _ = live
    deadline = time.monotonic() + 30
    while True:
        loaded = prom.rules()
        if all(not r["lastEvaluation"].startswith("0001-") for r in loaded):
            break
        assert time.monotonic() < deadline, loaded
        time.sleep(0.5)
    assert sorted(r["name"] for r in loaded) == sorted(r["alert"] for r in alert_rules())
    for rule in loaded:
        assert rule["health"] == "ok" and not rule.get("lastError"), rule
        assert rule["state"] == "inactive", rule
