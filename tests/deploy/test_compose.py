"""deploy/docker-compose.yml: loads, and runs the image with a volume, env file, restart policy and health check
(the postgresql profile's database: test_compose_postgresql.py)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from config.models import GatewayConfig
from tests.deploy.dockerfile import REPO, parse, stages

COMPOSE = REPO / "deploy" / "docker-compose.yml"


GATEWAY = "switchboard"
"""The gateway's service; the others (the postgresql profile's database) serve it."""


def service(name: str = GATEWAY) -> dict:
    document = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    return document["services"][name]


def seconds(value: str) -> float:
    total = 0.0
    for amount, unit in re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", value):
        total += float(amount) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]
    return total


def test_service_builds_this_repository_and_keeps_data_in_a_named_volume() -> None:
    document = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    svc = service()
    assert (COMPOSE.parent / svc["build"]["context"]).resolve() == REPO
    assert svc["build"].get("dockerfile", "Dockerfile") == "Dockerfile"
    (volume,) = svc["volumes"]
    name, target = volume.split(":")[:2]
    assert target == "/data" and name in document["volumes"]
    assert svc["environment"]["SWITCHBOARD_HOME"] == "/data"


def test_secrets_come_from_an_env_file_that_is_documented() -> None:
    svc = service()
    assert svc["env_file"] == [".env"]
    assert (COMPOSE.parent / ".env.example").is_file(), "deploy/.env.example shows what goes in deploy/.env"
    assert not any(re.search(r"(?i)token|secret|key", name) for name in svc.get("environment", {}))


def test_restarts_and_stops_gracefully() -> None:
    svc = service()
    assert svc["restart"] in {"always", "unless-stopped"}
    assert seconds(svc["stop_grace_period"]) > GatewayConfig().drain_timeout


def test_the_restart_policy_says_what_it_does_with_exit_status_2() -> None:
    """Compose cannot exempt an exit status from its restart policy (systemd's unit can): the file says that a
    configuration error (exit status 2) is retried with Docker's growing pause, and where the reason is."""
    lines = COMPOSE.read_text(encoding="utf-8").splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("restart:"))
    comment = " ".join(line.strip().lstrip("#") for line in lines[:at] if line.strip().startswith("#"))
    assert "exit status 2" in comment and "docker compose logs" in comment


def test_health_check_matches_the_images() -> None:
    check = service()["healthcheck"]
    image_check = next(i for i in stages(parse())[-1] if i.keyword == "HEALTHCHECK").args
    command = check["test"]
    assert command[0] == "CMD"
    assert " ".join(command[1:]).split("/health")[0].split("http://")[1] in image_check
    assert "/health" in " ".join(command)
    for key in ("interval", "timeout", "retries"):
        assert key in check


def compose_plugin() -> str:
    """The docker CLI, when its compose plugin is installed; else the test is skipped, saying which is missing."""
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("no docker CLI on this machine")
    plugin = subprocess.run([docker, "compose", "version"], capture_output=True, text=True, timeout=60)
    if plugin.returncode != 0:
        pytest.skip(f"the docker compose plugin is not installed ({(plugin.stderr or plugin.stdout).strip().splitlines()[0]})")
    return docker


def compose_accepts(path: Path, *options: str) -> None:
    """``docker compose config`` finds nothing wrong with the compose file ``path`` (skipped without the plugin)."""
    docker = compose_plugin()
    env_file = path.parent / ".env"
    created = not env_file.exists()
    if created:
        env_file.write_text("", encoding="utf-8")  # compose refuses a missing env_file
    try:
        done = subprocess.run([docker, "compose", "-f", str(path), *options, "config", "--quiet"],
                              capture_output=True, text=True, timeout=60)  # fmt: skip
    finally:
        if created:
            env_file.unlink()
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("profile", [[], ["--profile", "postgresql"]], ids=["default", "postgresql"])
def test_docker_compose_accepts_the_file(profile: list[str]) -> None:
    compose_accepts(COMPOSE, *profile)
