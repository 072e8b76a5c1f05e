"""A real Alertmanager (Debian's `prometheus-alertmanager`) on 127.0.0.1, and a real Prometheus
that evaluates alerting rules and sends to it, for the alerting tests.

`AlertmanagerServer` writes a config (one webhook receiver with a bearer token, short
group_wait/group_interval), starts the binary on an ephemeral port with clustering off and its
own `--storage.path`, and waits for `/-/ready`. `AlertingPrometheus` is the shared
`PrometheusServer` fixture plus `rule_files` and an `alerting` section. `shorten_rules` makes
the test copy of deploy/'s rules: every window and `for:` cut to seconds; `alerting_stack` runs
all three against a running bot. A missing binary fails the test with the apt package to
install; it is never skipped.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import yaml
from servers.prometheus import (
    PrometheusServer,
    ScrapeTarget,
    answers_ready,
    free_port,
    poll,
    require_binary,
    stop_process,
)


class AlertmanagerServer:
    """Debian's alertmanager on 127.0.0.1:<ephemeral>, config and data under `workdir`."""

    def __init__(
        self,
        workdir: Path,
        *,
        webhook_url: str,
        token: str | None = None,
        group_wait: str = "1s",
        group_interval: str = "1s",
        group_by: Sequence[str] = ("alertname",),
        port: int | None = None,
    ) -> None:
        self.binary = require_binary("prometheus-alertmanager", package="prometheus-alertmanager")
        self.workdir = workdir
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config_file = workdir / "alertmanager.yml"
        self.log_file = workdir / "alertmanager.log"
        webhook: dict[str, Any] = {"url": webhook_url, "send_resolved": True, "max_alerts": 0}
        if token is not None:
            token_file = workdir / "bot-token"
            token_file.write_text(token)
            webhook["http_config"] = {
                "authorization": {"type": "Bearer", "credentials_file": str(token_file)}
            }
        route = {
            "receiver": "gpu-oncall",
            "group_by": list(group_by),
            "group_wait": group_wait,
            "group_interval": group_interval,
            "repeat_interval": "1h",
        }
        config = {
            "route": route,
            "receivers": [{"name": "gpu-oncall", "webhook_configs": [webhook]}],
        }
        self.config_file.write_text(yaml.safe_dump(config))
        self._process: subprocess.Popen[bytes] | None = None
        self.http = httpx.Client(base_url=self.url, timeout=5.0)

    def start(self) -> AlertmanagerServer:
        data = self.workdir / "am-data"
        data.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("wb") as log:
            self._process = subprocess.Popen(
                [
                    self.binary,
                    f"--config.file={self.config_file}",
                    f"--storage.path={data}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--cluster.listen-address=",
                    "--log.level=warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        poll(self._ready, what=f"alertmanager /-/ready on {self.url} (log: {self.log_file})")
        return self

    def stop(self) -> None:
        process, self._process = self._process, None
        self.http.close()
        stop_process(process)

    def alerts(self) -> list[dict[str, Any]]:
        """The alerts Alertmanager holds now (GET /api/v2/alerts)."""
        return list(self.http.get("/api/v2/alerts").json())

    def silences(self) -> list[dict[str, Any]]:
        return list(self.http.get("/api/v2/silences").json())

    def _ready(self) -> bool:
        return answers_ready(self._process, self.http, name="alertmanager", log_file=self.log_file)


class AlertingPrometheus(PrometheusServer):
    """The shared PrometheusServer, also evaluating `rule_files` and alerting `alertmanager`."""

    def __init__(
        self,
        workdir: Path,
        *,
        targets: Sequence[ScrapeTarget],
        rule_files: Sequence[Path],
        alertmanager: str,
        interval: str = "1s",
    ) -> None:
        super().__init__(workdir, targets=targets, scrape_interval=interval)
        config = yaml.safe_load(self.config_file.read_text())
        config["rule_files"] = [str(p) for p in rule_files]
        host = alertmanager.removeprefix("http://")
        config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [host]}]}]}
        self.config_file.write_text(yaml.safe_dump(config))

    def firing(self, alertname: str) -> list[dict[str, Any]]:
        """The rule's alerts that are firing now (Prometheus' ALERTS series)."""
        return self.query(f'ALERTS{{alertname="{alertname}",alertstate="firing"}}')


@contextmanager
def alerting_stack(
    bot_url: str, workdir: Path, *, rules: Path, token: str, am_port: int
) -> Iterator[AlertingPrometheus]:
    """Alertmanager posting to the bot's `/alerts` with `token`, and a Prometheus scraping the
    bot's `/sim/metrics` every second and evaluating `rules` cut to seconds; both stopped after.
    """
    (workdir / "am").mkdir()
    alertmanager = AlertmanagerServer(
        workdir / "am", webhook_url=f"{bot_url}/alerts", token=token, port=am_port
    ).start()
    (workdir / "prom").mkdir()
    prometheus = AlertingPrometheus(
        workdir / "prom",
        targets=[ScrapeTarget(job="sim", url=f"{bot_url}/sim/metrics")],
        rule_files=[shorten_rules(rules, workdir / "rules-short.yaml")],
        alertmanager=alertmanager.url,
    )
    try:
        yield prometheus.start()
    finally:
        prometheus.stop()
        alertmanager.stop()


_RANGE = re.compile(r"\[(\d+)([smhd])\]")
_OFFSET = re.compile(r"offset (\d+)([smhd])")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def shorten_rules(source: Path, target: Path, *, scale: float = 1 / 60, floor: int = 3) -> Path:
    """A copy of a rules file with every range window and offset scaled (10m -> 10s by
    default, never under `floor` seconds so rate() has samples) and every `for:` set to 0s."""

    def scaled(match: re.Match[str], template: str) -> str:
        seconds = int(match[1]) * _SECONDS[match[2]]
        return template.format(max(floor, round(seconds * scale)))

    groups = yaml.safe_load(source.read_text())["groups"]
    for group in groups:
        for rule in group["rules"]:
            expr = _RANGE.sub(lambda m: scaled(m, "[{}s]"), rule["expr"])
            rule["expr"] = _OFFSET.sub(lambda m: scaled(m, "offset {}s"), expr)
            if "for" in rule:
                rule["for"] = "0s"
    target.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    return target
