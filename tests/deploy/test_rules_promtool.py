"""The alerting rules in deploy/, checked by the real tools (Debian's promtool and amtool).

Covers: `promtool check rules` passes on the plain rules file and on the PrometheusRule's groups;
`promtool test rules` passes every unit test in deploy/prometheus/tests/; the PrometheusRule
carries exactly the plain file's groups; every alert has a `severity`; every alert a runbook
triggers on is defined, and its unit tests expect the label the runbook routes on;
`amtool check-config` passes on the Alertmanager example, which sends to `/alerts` with a bearer
token and resolved notifications. A missing binary fails (never skips).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml
from servers.prometheus import require_binary

from bot.config import Settings
from bot.wiring.runtime import load_catalogs

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
RULES = DEPLOY / "prometheus" / "gpu-oncall-rules.yaml"
UNIT_TESTS = sorted((DEPLOY / "prometheus" / "tests").glob("*.yaml"))
MANIFEST = DEPLOY / "kubernetes" / "base" / "prometheusrule.yaml"
ALERTMANAGER = DEPLOY / "alertmanager" / "alertmanager.yml"


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=60, check=False
    )


def rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def test_promtool_check_rules_passes_on_the_rules_file() -> None:
    done = run(require_binary("promtool", package="prometheus"), "check", "rules", RULES)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 16 rules found" in done.stdout


def test_promtool_check_rules_passes_on_the_prometheusrule_groups(tmp_path: Path) -> None:
    spec = yaml.safe_load(MANIFEST.read_text())["spec"]
    extracted = tmp_path / "from-manifest.yaml"
    extracted.write_text(yaml.safe_dump(spec))
    done = run(require_binary("promtool", package="prometheus"), "check", "rules", extracted)
    assert done.returncode == 0, done.stdout + done.stderr


def test_promtool_unit_tests_pass() -> None:
    assert len(UNIT_TESTS) >= 3
    done = run(require_binary("promtool", package="prometheus"), "test", "rules", *UNIT_TESTS)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("SUCCESS") == len(UNIT_TESTS)


def test_prometheusrule_manifest_carries_the_same_groups() -> None:
    manifest = yaml.safe_load(MANIFEST.read_text())
    assert manifest["apiVersion"] == "monitoring.coreos.com/v1"
    assert manifest["kind"] == "PrometheusRule"
    assert manifest["spec"]["groups"] == yaml.safe_load(RULES.read_text())["groups"]


def test_every_alert_has_a_severity() -> None:
    alerts = [r for r in rules() if "alert" in r]
    assert {r["alert"] for r in alerts} == {
        "GPUEccStorm",
        "GPUXidBurst",
        "GPUExporterDown",
        "IBLinkDegraded",
        "NCCLCollectiveHang",
        "TrainingMFURegression",
        "InferenceSLOBurnRate",
    }
    assert all(r["labels"]["severity"] in ("critical", "warning") for r in alerts)


def test_routed_alerts_are_defined_and_tested_with_their_target_label(settings: Settings) -> None:
    _, _, catalog = load_catalogs(settings)
    routes = catalog.alert_routes()
    assert routes, "no runbook triggers on an alert"
    defined = {r["alert"] for r in rules() if "alert" in r}
    expected = {
        item["alertname"]: item
        for path in UNIT_TESTS
        for case in yaml.safe_load(path.read_text())["tests"]
        for item in case.get("alert_rule_test", [])
        if item.get("exp_alerts")
    }
    for alertname, route in routes.items():
        assert alertname in defined, f"runbook {route.runbook} triggers on undefined {alertname}"
        assert alertname in expected, f"no promtool test expects {alertname} to fire"
        for exp in expected[alertname]["exp_alerts"]:
            assert exp["exp_labels"].get(route.target_label), (alertname, route.target_label)


def test_amtool_accepts_the_alertmanager_example() -> None:
    done = run(
        require_binary("amtool", package="prometheus-alertmanager"), "check-config", ALERTMANAGER
    )
    assert done.returncode == 0, done.stdout + done.stderr
    config = yaml.safe_load(ALERTMANAGER.read_text())
    (receiver,) = [r for r in config["receivers"] if r["name"] == "gpu-oncall"]
    webhook = receiver["webhook_configs"][0]
    assert webhook["url"].endswith("/alerts")
    assert webhook["send_resolved"] is True
    assert webhook["http_config"]["authorization"]["type"] == "Bearer"
