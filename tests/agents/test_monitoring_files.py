"""The Grafana dashboard and Prometheus alert rules in deploy/monitoring/ are valid JSON
and YAML of the shapes Grafana and Prometheus load, and every metric they name is one a
live agent's /metrics or the cluster's hosted endpoint exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests import factories

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka, pytest.mark.timeout(60)]

MONITORING = Path(__file__).resolve().parents[2] / "deploy" / "monitoring"
METRIC = re.compile(r"\bfloe_[a-z0-9_]+\b")
SUFFIXES = ("_total", "_bucket", "_sum", "_count", "_created")


def dashboard_expressions() -> list[str]:
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    assert dashboard["title"] and dashboard["uid"]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    exprs = []
    for panel in dashboard["panels"]:
        assert panel["datasource"]["type"] == "prometheus" and panel["targets"], panel["title"]
        exprs += [target["expr"] for target in panel["targets"]]
    return exprs


def rule_expressions() -> list[str]:
    rules = yaml.safe_load((MONITORING / "alert-rules.yml").read_text())
    exprs = []
    for group in rules["groups"]:
        assert group["name"] and group["rules"]
        for rule in group["rules"]:
            assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule
            assert rule["labels"]["severity"] in ("warning", "critical")
            assert rule["annotations"]["summary"]
            exprs.append(rule["expr"])
    return exprs


def exported(text: str) -> set[str]:
    return {family.name for family in text_string_to_metric_families(text)}


def test_the_files_parse_and_their_expressions_are_balanced():
    exprs = dashboard_expressions() + rule_expressions()
    assert len(exprs) >= 15
    for expr in exprs:
        assert expr.count("(") == expr.count(")") and expr.count("[") == expr.count("]"), expr
        assert METRIC.search(expr), expr


def test_every_metric_they_name_is_exported(agent, cluster, api):
    a = agent(cluster.key)
    key = factories.make_api_key(cluster.cluster.organization, role="member")
    endpoint = api(key).get(f"/api/v1/clusters/{cluster.public_id}/metrics")
    assert endpoint.status_code == 200
    families = exported(a.metrics()) | exported(endpoint.content.decode())

    def known(name: str) -> bool:
        return name in families or any(
            name.endswith(suffix) and name.removesuffix(suffix) in families for suffix in SUFFIXES
        )

    named = {name for expr in dashboard_expressions() + rule_expressions() for name in
             METRIC.findall(expr)}  # fmt: skip
    assert named, "the files name no metric"
    assert sorted(name for name in named if not known(name)) == []
    # Not vacuous: a name no one exports is caught.
    assert not known("floe_consumer_group_lagg")
