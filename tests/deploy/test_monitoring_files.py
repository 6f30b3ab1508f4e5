"""deploy/prometheus/switchboard-alerts.yml and deploy/grafana/switchboard.json: they load, their PromQL parses, and
every metric, label and label value they ask for is one a gateway's /metrics serves."""

from __future__ import annotations

import json
import re
import typing
from functools import cache
from pathlib import Path

import promql_parser
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from adapters.contract.adapter import AdapterState
from agent.loop import TurnResult
from gateway.operations.metrics import Count, Level, Levels, Metrics, Timing
from storage.errors import Fault
from tests.deploy.dockerfile import REPO
from tests.deploy.readme import section

RULES = REPO / "deploy" / "prometheus" / "switchboard-alerts.yml"
DASHBOARD = REPO / "deploy" / "grafana" / "switchboard.json"
RUNNER = REPO / "gateway" / "turn" / "runner.py"

TARGET_LABELS = frozenset({"job", "instance"})
"""Labels Prometheus adds to every series it scrapes."""
PROMETHEUS_OWN = {"up": TARGET_LABELS}
"""Series Prometheus makes itself for every target."""
SEVERITIES = {"critical", "warning", "info"}
GRAFANA_BUILTINS = {"__rate_interval": "5m", "__interval": "1m", "__range": "1d"}
"""What Grafana puts in place of its own variables (any duration will do for parsing)."""


@cache
def served() -> dict[str, frozenset[str]]:
    """Every sample name a gateway's /metrics serves once each metric has a value, with the labels it carries.

    A counter with labels shows only its HELP and TYPE lines until it first counts, so each metric is given a value
    first; the names then come from the rendered text, as Prometheus reads it.
    """
    metrics = Metrics()
    for metric in vars(metrics).values():
        if isinstance(metric, Count):
            metric.inc(*("x" for _ in metric.labelnames))
        elif isinstance(metric, Levels):
            metric.set_function(lambda n=len(metric.labelnames): {("x",) * n: 1.0})
        elif isinstance(metric, Level):
            metric.value = 1.0
        elif isinstance(metric, Timing):
            metric.observe(1.0)
    names: dict[str, frozenset[str]] = dict(PROMETHEUS_OWN)
    for family in text_string_to_metric_families(metrics.render().decode()):
        assert family.samples, f"{family.name} was given no value here: teach served() its kind of metric"
        for sample in family.samples:
            names[sample.name] = frozenset(sample.labels) | TARGET_LABELS
    return names


def turn_outcomes() -> set[str]:
    """The ``outcome`` values switchboard_turns_total gets: the agent's own and the runner's failures."""
    agent = set(typing.get_args(typing.get_type_hints(TurnResult)["outcome"]))
    runner = set(re.findall(r'turns\.inc\([^,()]+, "(\w+)"\)', RUNNER.read_text(encoding="utf-8")))
    assert runner, "gateway/turn/runner.py no longer counts failed turns as this test reads them"
    return agent | runner


def token_kinds() -> set[str]:
    metrics = Metrics()
    metrics.add_tokens(1, 1, 1, 1)
    return {kind for (kind,) in metrics.tokens.totals}


def known_values() -> dict[tuple[str, str], set[str]]:
    """For the labels whose values the code fixes: (sample name, label) -> every value it can take."""
    return {
        ("switchboard_adapter_state", "state"): {state.value for state in AdapterState},
        ("switchboard_turn_retries_total", "fault"): {fault.value for fault in Fault},
        ("switchboard_turns_total", "outcome"): turn_outcomes(),
        ("switchboard_tokens_total", "kind"): token_kinds(),
    }


def rules() -> list[dict]:
    document = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    return [rule for group in document["groups"] for rule in group["rules"]]


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


def panels() -> list[dict]:
    return [panel for panel in dashboard()["panels"] if panel["type"] != "row"]


def variables() -> dict[str, dict]:
    return {variable["name"]: variable for variable in dashboard()["templating"]["list"]}


def as_promql(expr: str) -> str:
    """A dashboard query with Grafana's variables replaced as Grafana would, so Prometheus' parser can read it."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name in GRAFANA_BUILTINS:
            return GRAFANA_BUILTINS[name]
        assert name in variables(), f"the query {expr!r} uses ${name}, which the dashboard does not define"
        return ".*"  # a multi-value variable inside =~, as Grafana writes "All"

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", value, expr)


def dashboard_queries() -> list[tuple[str, str]]:
    """(where, PromQL) of every query the dashboard sends to Prometheus."""
    return [
        (f"panel {panel['title']!r} {target['refId']}", as_promql(target["expr"]))
        for panel in panels()
        for target in panel["targets"]
    ]


def rule_queries() -> list[tuple[str, str]]:
    return [(f"rule {rule['alert']}", rule["expr"]) for rule in rules()]


def selectors(expr: str) -> list[promql_parser.VectorSelector]:
    found: list[promql_parser.VectorSelector] = []
    promql_parser.walk(
        promql_parser.parse(expr), lambda node: found.append(node) if isinstance(node, promql_parser.VectorSelector) else None
    )
    return found


def used_names(queries: list[tuple[str, str]]) -> set[str]:
    return {selector.name for _, expr in queries for selector in selectors(expr)}


QUERIES = [*rule_queries(), *dashboard_queries()] if RULES.exists() and DASHBOARD.exists() else []


def test_both_files_exist_and_load() -> None:
    assert RULES.is_file() and DASHBOARD.is_file()
    assert rules() and panels()


@pytest.mark.parametrize(("where", "expr"), QUERIES, ids=[where for where, _ in QUERIES])
def test_every_query_parses_and_asks_only_for_what_a_gateway_serves(where: str, expr: str) -> None:
    try:
        found = selectors(expr)
    except ValueError as error:
        pytest.fail(f"{where}: {expr!r} is not PromQL: {error}")
    assert found, f"{where} reads no metric"
    vocabulary = known_values()
    for selector in found:
        assert selector.name in served(), f"{where} reads {selector.name}, which /metrics does not serve"
        for matcher in selector.matchers.matchers:
            assert matcher.name in served()[selector.name], f"{where}: {selector.name} has no label {matcher.name!r}"
            values = vocabulary.get((selector.name, matcher.name))
            if values is None:
                continue
            if matcher.op in (promql_parser.MatchOp.Re, promql_parser.MatchOp.NotRe):
                for alternative in matcher.value.split("|"):
                    assert alternative in values, f"{where}: {matcher.name} is never {alternative!r} (only {sorted(values)})"
            else:
                assert matcher.value in values, f"{where}: {matcher.name} is never {matcher.value!r} (only {sorted(values)})"


def test_the_rules_cover_every_condition_the_gateway_alerts_on_and_the_gateway_down() -> None:
    assert used_names(rule_queries()) >= {
        "up",
        "switchboard_adapter_state",
        "switchboard_liveness_probe_ok",
        "switchboard_adapter_seconds_since_inbound",
        "switchboard_delivery_failed_total",
        "switchboard_turns_total",
        "switchboard_turn_retries_total",
        "switchboard_disk_free_ratio",
        "switchboard_compaction_failures_total",
    }


def test_every_rule_waits_is_graded_and_says_what_to_do() -> None:
    document = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    groups = [group["name"] for group in document["groups"]]
    assert len(groups) == len(set(groups)), "two rule groups have one name (Prometheus refuses the file)"
    names = [rule["alert"] for rule in rules()]
    assert len(names) == len(set(names))
    for rule in rules():
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations", "keep_firing_for"}, rule["alert"]
        assert re.fullmatch(r"\d+[smh]", rule["for"]), f"{rule['alert']}: for: {rule['for']!r}"
        assert rule["labels"]["severity"] in SEVERITIES, rule["alert"]
        annotations = rule["annotations"]
        assert annotations["summary"].strip() and len(annotations["description"]) > 80, rule["alert"]
        labels = set().union(*(served()[name] for name in used_names([("", rule["expr"])])))
        for text in annotations.values():
            assert text.count("{{") == text.count("}}"), f"{rule['alert']}: unbalanced template braces"
            for label in re.findall(r"\$labels\.(\w+)", text):
                assert label in labels, f"{rule['alert']} quotes $labels.{label}, which its series do not carry"


def test_the_dashboard_picks_its_prometheus_and_every_query_goes_to_it() -> None:
    (source,) = [v for v in variables().values() if v["type"] == "datasource"]
    assert source["query"] == "prometheus"
    chosen = {"type": "prometheus", "uid": "${%s}" % source["name"]}
    for panel in panels():
        assert panel["datasource"] == chosen, panel["title"]
        assert panel["targets"], f"panel {panel['title']!r} has no query"
        assert all(target["datasource"] == chosen for target in panel["targets"]), panel["title"]
    for variable in variables().values():
        if variable["type"] == "query":
            assert variable["datasource"] == chosen
            metric, label = re.fullmatch(r"label_values\((\w+), *(\w+)\)", variable["definition"]).groups()
            assert variable["query"]["query"] == variable["definition"]
            assert label in served()[metric], f"variable {variable['name']}: {metric} has no label {label}"


def test_the_dashboard_shows_what_the_issue_asks_for() -> None:
    assert used_names(dashboard_queries()) >= {
        "switchboard_turns_total",
        "switchboard_turn_seconds_bucket",
        "switchboard_tokens_total",
        "switchboard_cost_usd_total",
        "switchboard_delivery_retries_total",
        "switchboard_adapter_state",
        "switchboard_adapter_seconds_since_inbound",
        "switchboard_liveness_probes_total",
        "switchboard_liveness_probe_ok",
    }
    latency = " ".join(expr for _, expr in dashboard_queries() if "switchboard_turn_seconds_bucket" in expr)
    assert "histogram_quantile(0.5," in latency and "histogram_quantile(0.95," in latency
    share = [expr for _, expr in dashboard_queries() if 'kind="cache_read"' in expr]
    assert share and all('kind=~"input|cache_read|cache_write"' in expr for expr in share)


def test_the_dashboard_panels_have_ids_of_their_own_and_do_not_overlap() -> None:
    every = dashboard()["panels"]
    ids = [panel["id"] for panel in every]
    assert len(ids) == len(set(ids))
    cells: dict[tuple[int, int], str] = {}
    for panel in every:
        box = panel["gridPos"]
        assert 0 <= box["x"] and box["x"] + box["w"] <= 24, panel["title"]
        for x in range(box["x"], box["x"] + box["w"]):
            for y in range(box["y"], box["y"] + box["h"]):
                assert (x, y) not in cells, f"{panel['title']!r} covers {cells.get((x, y))!r}"
                cells[(x, y)] = panel["title"]


def monitoring() -> str:
    return section("Monitoring")


def test_the_readme_says_how_to_load_both_files_and_what_each_alert_means() -> None:
    text = monitoring()
    assert str(RULES.relative_to(REPO)) in text and str(DASHBOARD.relative_to(REPO)) in text
    (config,) = [yaml.safe_load(block) for block in re.findall(r"^```yaml\n(.*?)^```", text, flags=re.M | re.S)]
    assert any(Path(path).name == RULES.name for path in config["rule_files"])
    (job,) = config["scrape_configs"]
    jobs_in_rules = {m.value for _, expr in rule_queries() for s in selectors(expr) for m in s.matchers.matchers if m.name == "job"}
    assert jobs_in_rules == {job["job_name"]}, "the rules and the README's scrape job must name the same job"
    assert job.get("metrics_path", "/metrics") == "/metrics"
    for rule in rules():
        assert f"`{rule['alert']}`" in text, f"README.md's Monitoring part does not say what {rule['alert']} means"
