"""A real Prometheus (Debian's ``prometheus`` package) scraping given targets every second and
evaluating given rule files, so the dashboard's and alerts' PromQL is run, not only read."""

from __future__ import annotations

import json
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from servers.ports import free_port
from servers.process import OwnedProcess, Started

INSTALL_HINT = "apt-get install prometheus (Debian's package; promtool comes with it)"


def prometheus_binary(name: str = "prometheus") -> str:
    """Path of ``prometheus`` (or ``promtool``) on PATH; a clear error when absent."""
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"no {name} on PATH: {INSTALL_HINT}")
    return found


class PrometheusError(RuntimeError):
    """The HTTP API answered ``status: error`` (a query that does not parse, say)."""


class PrometheusServer(OwnedProcess, Started):
    """Prometheus on a free loopback port, scraping ``targets`` (host:port of /metrics) as one
    job every ``interval_s`` and evaluating ``rule_files`` as often; storage in a temp dir."""

    def __init__(
        self,
        targets: Sequence[str],
        *,
        job: str = "noveld",
        rule_files: Sequence[Path] = (),
        interval_s: float = 1.0,
    ) -> None:
        super().__init__("prometheus")
        self.port = free_port()
        self.targets = list(targets)
        self.job = job
        self.rule_files = [Path(p).resolve() for p in rule_files]
        self.interval_s = interval_s

    @property
    def url(self) -> str:
        """Base URL of the web UI and HTTP API."""
        return f"http://127.0.0.1:{self.port}"

    def config(self) -> dict[str, Any]:
        """The generated prometheus.yml."""
        every = f"{int(self.interval_s * 1000)}ms"
        return {
            "global": {"scrape_interval": every, "evaluation_interval": every},
            "rule_files": [str(p) for p in self.rule_files],
            "scrape_configs": [
                {
                    "job_name": self.job,
                    "scrape_timeout": every,
                    "static_configs": [{"targets": self.targets}],
                }
            ],
        }

    def start(self, timeout: float = 30.0) -> PrometheusServer:
        """Write the config, start, and return once /-/ready answers 200."""
        config = self.dir / "prometheus.yml"
        config.write_text(yaml.safe_dump(self.config(), sort_keys=False))
        for attempt in range(3):
            self._spawn(
                [
                    prometheus_binary(),
                    f"--config.file={config}",
                    f"--storage.tsdb.path={self.dir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--log.level=warn",
                ]
            )
            try:
                self.wait_ready(timeout)
                return self
            except RuntimeError:
                self.kill()
                if not ("address already in use" in self.log().lower() and attempt < 2):
                    raise
                self.port = free_port()  # someone took the port between free_port() and bind
        raise AssertionError("unreachable")

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Poll /-/ready (200 once the storage is open and the config loaded)."""
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline and self.running:
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except OSError as exc:  # URLError and HTTPError (503 while starting) included
                last = exc
            time.sleep(0.1)
        state = "exited" if not self.running else f"not ready within {timeout:.0f} s"
        raise RuntimeError(
            f"prometheus on port {self.port} ({state}, last error {last!r}); "
            f"log {self.log_path}:\n{self.log()}"
        )

    def api(self, path: str, params: Sequence[tuple[str, str]] = ()) -> Any:
        """GET /api/v1/``path`` and return its ``data``; PrometheusError on ``status: error``
        (Prometheus answers a bad query with 400 and the parser's message in the body)."""
        query = urllib.parse.urlencode(list(params))
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=10) as resp:
                body = json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            body = json.loads(exc.read() or b"{}")
        if body.get("status") != "success":
            raise PrometheusError(f"{path} {dict(params)}: {body.get('error', body)}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query now: its series (a scalar result counts as one)."""
        data = self.api("query", [("query", expr)])
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": data["result"]}]
        result: list[dict[str, Any]] = data["result"]
        return result

    def series(self, match: str) -> list[dict[str, str]]:
        """Label sets of the series matching the selector ``match`` (last 5 min, say)."""
        found: list[dict[str, str]] = self.api(
            "series", [("match[]", match), ("start", str(time.time() - 300))]
        )
        return found

    def label_values(self, label: str, match: str) -> list[str]:
        """Values of ``label`` over the series ``match`` selects (Grafana's label_values)."""
        values: list[str] = self.api(f"label/{label}/values", [("match[]", match)])
        return values

    def rules(self) -> list[dict[str, Any]]:
        """Every loaded rule with its health, last error and last evaluation."""
        groups = self.api("rules")["groups"]
        return [rule for g in groups for rule in g["rules"]]

    def stop(self) -> None:
        """Kill Prometheus and remove its directory."""
        self._cleanup()
