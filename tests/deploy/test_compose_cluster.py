"""deploy/docker-compose.cluster.yml: three replicas in cluster mode on one PostgreSQL, behind an nginx proxy that
spreads the platforms' webhook requests over them, each replica's /health checked.

There is no Docker engine on the test machines: the compose file, the replicas' shared configuration
(deploy/cluster/config.yaml, read by the real config loader as each replica reads it) and the proxy's
nginx.conf are read and checked against each other. Where the docker compose plugin exists, it
resolves the file itself.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from config.loader import LoadedConfig, load_config
from tests.deploy.readme import commands, section
from tests.deploy.test_compose import COMPOSE, compose_accepts, seconds, service
from tests.deploy.test_compose_postgresql import DATABASE

CLUSTER = COMPOSE.parent / "docker-compose.cluster.yml"
CONFIG = COMPOSE.parent / "cluster" / "config.yaml"
NGINX = COMPOSE.parent / "cluster" / "nginx.conf"
PROXY = "proxy"
MOUNTED_CONFIG = "/etc/switchboard/config.yaml"


def document() -> dict:
    return yaml.safe_load(CLUSTER.read_text(encoding="utf-8"))


def replicas() -> dict[str, dict]:
    return {name: svc for name, svc in document()["services"].items() if name not in {PROXY, DATABASE}}


def replica_config(svc: dict, tmp_path: Path) -> LoadedConfig:
    """The configuration one replica runs with: the shared file, its environment, deploy/.env's secrets."""
    environ = {**svc["environment"], "SWITCHBOARD_HOME": str(tmp_path / "home"), "PGPASSWORD": "x",
               "TELEGRAM_BOT_TOKEN": "123:abc", "TELEGRAM_WEBHOOK_URL": "https://bot.example.org/telegram",
               "TELEGRAM_WEBHOOK_SECRET": "a-long-random-secret", "SLACK_BOT_TOKEN": "xoxb-1",
               "SLACK_SIGNING_SECRET": "signing"}  # fmt: skip
    return load_config(CONFIG, environ)


def upstreams() -> dict[str, list[tuple[str, int]]]:
    """nginx.conf's upstream blocks: name -> the (host, port) of each server."""
    text = NGINX.read_text(encoding="utf-8")
    return {
        name: [(host, int(port)) for host, port in re.findall(r"^\s*server\s+([\w.-]+):(\d+)", body, flags=re.M)]
        for name, body in re.findall(r"upstream\s+(\w+)\s*\{(.*?)\}", text, flags=re.S)
    }


def locations() -> dict[str, str]:
    """nginx.conf's exact locations that pass requests on: path -> upstream."""
    text = NGINX.read_text(encoding="utf-8")
    return dict(re.findall(r"location\s*=\s*(\S+)\s*\{[^}]*?proxy_pass\s+http://(\w+);", text, flags=re.S))


def test_three_replicas_share_one_configuration_and_one_database_each_with_a_name_and_home_of_its_own() -> None:
    found = replicas()
    assert len(found) == 3
    names = [svc["environment"]["SWITCHBOARD_REPLICA_ID"] for svc in found.values()]
    assert len(set(names)) == 3, "each replica needs its own cluster.replica_id"
    homes: list[str] = []
    for name, svc in found.items():
        assert (CLUSTER.parent / svc["build"]["context"]).resolve() == COMPOSE.parent.parent
        assert svc["command"] == ["run", "--config", MOUNTED_CONFIG]
        mounts = dict(reversed(volume.split(":")[:2]) for volume in svc["volumes"])
        assert (CLUSTER.parent / mounts[MOUNTED_CONFIG]).resolve() == CONFIG.resolve()
        assert svc["volumes"][[v.split(":")[1] for v in svc["volumes"]].index(MOUNTED_CONFIG)].endswith(":ro")
        assert svc["environment"]["SWITCHBOARD_HOME"] == "/data"
        homes.append(mounts["/data"])
        assert svc["depends_on"][DATABASE]["condition"] == "service_healthy"
        assert svc["env_file"] == [".env"] and svc["restart"] == service()["restart"]
        assert seconds(svc["stop_grace_period"]) > 30, f"{name}: room to drain turns and hand over at a clean stop"
    assert len(set(homes)) == 3, "a home each: the home's lock file admits one gateway"
    for shared in ("/data/media", "/data/memories"):  # a turn may run on another replica than the one a file reached
        (volume,) = {dict(reversed(v.split(":")[:2]) for v in svc["volumes"])[shared] for svc in found.values()}
        assert volume in document()["volumes"], shared
    volumes = document()["volumes"]
    assert {volumes[home]["name"] for home in homes} == {f"switchboard-cluster-{n}" for n in found}
    assert all(volume["name"].startswith("switchboard-cluster-") for volume in volumes.values()), "fixed names"


def test_each_replica_runs_in_cluster_mode_on_the_compose_database_under_its_own_name(tmp_path: Path) -> None:
    db = document()["services"][DATABASE]
    assert db["image"] == "postgres:15" and "ports" not in db
    for name, svc in replicas().items():
        settings = replica_config(svc, tmp_path).settings
        assert settings.cluster.enabled and settings.cluster.replica_id == name
        url = urlsplit(settings.storage.url)
        assert url.scheme == "postgresql" and url.hostname == DATABASE and url.password is None
        assert url.username == db["environment"]["POSTGRES_USER"] and url.path == "/" + db["environment"]["POSTGRES_DB"]


def test_each_replicas_health_is_checked_on_the_port_the_configuration_gives(tmp_path: Path) -> None:
    for svc in replicas().values():
        port = replica_config(svc, tmp_path).settings.health.port
        check = svc["healthcheck"]
        assert check["test"][0] == "CMD" and f"http://127.0.0.1:{port}/health" in " ".join(check["test"])
        assert "status == 200" in " ".join(check["test"]), "degraded (503), e.g. an expired replica, counts as unhealthy"
        for key in ("interval", "timeout", "retries"):
            assert key in check


def test_the_proxy_spreads_telegram_webhooks_and_slack_events_over_every_replica(tmp_path: Path) -> None:
    proxy = document()["services"][PROXY]
    assert re.fullmatch(r"nginx:[\d.]+(-alpine)?", proxy["image"]), "the official image, a fixed version"
    (published,) = proxy["ports"]
    assert published.split(":")[-1] == re.search(r"listen\s+(\d+);", NGINX.read_text(encoding="utf-8")).group(1)
    assert (CLUSTER.parent / proxy["volumes"][0].split(":")[0]).resolve() == NGINX.resolve()
    assert set(proxy["depends_on"]) == set(replicas())
    settings = replica_config(next(iter(replicas().values())), tmp_path).settings
    telegram, slack = settings.platforms.telegram, settings.platforms.slack
    assert telegram.mode == "webhook" and slack.mode == "http"
    wanted = {
        urlsplit(telegram.webhook_url).path: telegram.webhook_listen.port,
        slack.http_listen.path: slack.http_listen.port,
    }
    routes, pools = locations(), upstreams()
    assert set(routes) == set(wanted)
    for path, port in wanted.items():
        assert sorted(pools[routes[path]]) == sorted((name, port) for name in replicas()), path
    for svc in replicas().values():  # the proxy can reach each replica's listeners on the project's network
        listening = replica_config(svc, tmp_path).settings.platforms
        assert listening.telegram.webhook_listen.host == "0.0.0.0" and listening.slack.http_listen.host == "0.0.0.0"
        assert "ports" not in svc, "the replicas are reached through the proxy only"


def test_a_replica_that_fails_is_skipped_by_the_proxy() -> None:
    text = NGINX.read_text(encoding="utf-8")
    assert re.search(r"proxy_next_upstream\s+[^;]*\berror\b[^;]*\bnon_idempotent\b", text), "webhooks are POSTs"
    assert all("max_fails=" in line for line in text.splitlines() if line.strip().startswith("server ") and ":" in line)


def test_the_readme_says_how_to_run_several_gateways_and_what_happens_on_failover() -> None:
    text = section("Running several gateways")
    assert str(CLUSTER.relative_to(COMPOSE.parent.parent)) in text
    assert any("-f" in words and "up" in words for words in commands(text, "docker"))
    for phrase in ("cluster.enabled", "replica_id", "expire_after", "switchboard cluster status", "/health", "2-core"):
        assert phrase in text, phrase


def test_docker_compose_accepts_the_cluster_file() -> None:
    compose_accepts(CLUSTER)


@pytest.fixture(autouse=True)
def _files_exist() -> None:
    assert CLUSTER.is_file() and CONFIG.is_file() and NGINX.is_file()
