"""Deployment files: every metric name the Grafana dashboard and the alert rules use
is exported by a live daemon; the files parse; compose, Kubernetes and the Dockerfile keep the
operational promises (non-root, health checks, grace period, AOF, two replicas, valid env)."""

from __future__ import annotations

import json
import re
import select
import signal
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_runner import NOVELD
from prometheus_client import generate_latest
from servers.ports import free_port

from noveld.daemon.metrics import Metrics
from noveld.daemon.settings import Settings

pytestmark = pytest.mark.integration
DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
METRIC = re.compile(r"\bnoveld_[a-z_]+")


def load_yaml_docs(path: Path) -> list[Any]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def dashboard_exprs() -> list[str]:
    dash = json.loads((DEPLOY / "grafana" / "noveld.json").read_text())
    return [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]


def alert_exprs(rules: dict[str, Any]) -> list[str]:
    return [r["expr"] for g in rules["groups"] for r in g["rules"]]


def names_in(exprs: list[str]) -> set[str]:
    """Series names in PromQL (histogram ``_bucket`` series are in the scrape as such)."""
    return {name for e in exprs for name in METRIC.findall(e)}


def scrape_live_daemon(tmp_path: Path) -> str:
    port = free_port()
    proc = subprocess.Popen(
        [*NOVELD, "run", "--input", "-", "--metrics-port", str(port),
         "--dlq", str(tmp_path / "d.jsonl")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    try:
        for i in range(6):
            proc.stdin.write(json.dumps({"id": f"d{i}", "text": "flood warning river city"}) + "\n")
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], 30.0)
        assert ready, "the daemon emitted no event"
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)


def test_every_dashboard_and_alert_metric_is_exported(tmp_path: Path) -> None:
    body = scrape_live_daemon(tmp_path)
    # the live daemon reads stdin; a Kafka-mode daemon adds its broker gauges on its first
    # look at the lag, from the same Metrics (tests/faults/test_kafka_partition.py scrapes them)
    kafka = Metrics("dpmm")
    kafka.set_kafka(True, 0)
    body += generate_latest(kafka.registry).decode()
    exported = {m.group(0) for m in METRIC.finditer(body)}
    sources = {
        "grafana dashboard": names_in(dashboard_exprs()),
        "prometheus alerts": names_in(alert_exprs(yaml.safe_load(
            (DEPLOY / "prometheus" / "alerts.yml").read_text()))),
        "PrometheusRule": names_in(alert_exprs(
            load_yaml_docs(DEPLOY / "k8s" / "prometheusrule.yaml")[0]["spec"])),
    }  # fmt: skip
    for where, names in sources.items():
        assert len(names) >= 5, f"{where} uses too few noveld metrics to be a real check"
        missing = sorted(n for n in names if n not in exported)
        assert not missing, f"{where} uses metrics the daemon does not export: {missing}"


def test_the_dashboard_picks_its_data_source_and_filters_every_query() -> None:
    """Importable into any Grafana: no panel names a fixed data source, and every series is
    filtered by the Job and Replica variables (several deployments, one Grafana)."""
    dash = json.loads((DEPLOY / "grafana" / "noveld.json").read_text())
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert {"job", "instance"} <= variables.keys()
    for panel in dash["panels"]:
        sources = [panel["datasource"], *(t["datasource"] for t in panel.get("targets", []))]
        assert all(s["uid"] == "${datasource}" for s in sources), panel["title"]
    for expr in dashboard_exprs():
        for name in METRIC.findall(expr):
            assert f'{name}{{job=~"$job", instance=~"$instance"}}' in expr, expr


def test_deploy_files_parse_and_keep_their_promises() -> None:
    for path in DEPLOY.rglob("*"):
        if path.suffix in (".yaml", ".yml"):
            assert load_yaml_docs(path), path
        elif path.suffix == ".json":
            json.loads(path.read_text())
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    assert {"kafka", "redis", "prometheus", "grafana", "noveld-1", "noveld-2"} <= set(services)
    assert "--appendonly" in services["redis"]["command"]
    replicas = [services["noveld-1"], services["noveld-2"]]
    envs = [s["environment"] for s in replicas]
    assert envs[0]["NOVELD_KAFKA__GROUP"] == envs[1]["NOVELD_KAFKA__GROUP"]
    assert envs[0]["NOVELD_NAMESPACE"] == envs[1]["NOVELD_NAMESPACE"]
    assert all(int(s["stop_grace_period"].rstrip("s")) >= 30 for s in replicas)

    k8s = {d["kind"]: d for p in (DEPLOY / "k8s").glob("*.yaml") for d in load_yaml_docs(p)}
    assert {"Deployment", "ServiceMonitor", "PrometheusRule", "ConfigMap", "Secret"} <= set(k8s)
    pod = k8s["Deployment"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert pod["terminationGracePeriodSeconds"] >= 30
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"

    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert re.search(r"^USER (?!root|0\b)\S+", dockerfile, re.M), "image must not run as root"
    assert "HEALTHCHECK" in dockerfile and "noveld check" in dockerfile


def test_deployment_env_is_a_valid_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    """The NOVELD_* variables the deploy files set are real settings (a typo would make the
    daemon refuse to start, extra='forbid')."""
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    k8s = {d["kind"]: d for p in (DEPLOY / "k8s").glob("*.yaml") for d in load_yaml_docs(p)}
    for env in (
        compose["services"]["noveld-1"]["environment"],
        {**k8s["ConfigMap"]["data"], **k8s["Secret"]["stringData"]},
    ):
        noveld_env = {k: str(v) for k, v in env.items() if k.startswith("NOVELD_")}
        assert noveld_env
        for k, v in noveld_env.items():
            monkeypatch.setenv(k, v)
        settings = Settings()
        assert settings.kafka.input_topic and settings.kafka.bootstrap_servers
        assert settings.redis.url is not None and settings.metrics_port == 9108
        for k in noveld_env:
            monkeypatch.delenv(k)


def test_the_dashboard_links_the_web_view_the_stack_serves() -> None:
    """Grafana's dashboard links to the live-stories page (its address a variable), and the
    compose stack serves that page at the variable's default, read from the replicas' state."""
    dash = json.loads((DEPLOY / "grafana" / "noveld.json").read_text())
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert [link["url"] for link in dash["links"]] == ["${ui}"]
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    ui = compose["services"]["ui"]
    assert ui["entrypoint"][:2] == ["noveld", "ui"] and "9109" in ui["entrypoint"]
    assert variables["ui"]["query"] == "http://localhost:9109/"
    assert "127.0.0.1:9109:9109" in ui["ports"]
    replica = compose["services"]["noveld-1"]["environment"]
    for key in ("NOVELD_NAMESPACE", "NOVELD_REDIS__URL"):
        assert ui["environment"][key] == replica[key]
