"""deploy/docker-compose.yml's postgresql profile: a PostgreSQL 15 server for the gateway, its password from
deploy/.env, while the default profile still runs the gateway alone on SQLite.

There is no Docker engine on the test machines: the file is read as Compose reads it (services without
``profiles`` always run; ``${VAR}`` is filled from deploy/.env, the project's .env, and the environment).
Where the docker compose plugin exists, it resolves the file itself.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from tests.deploy.readme import commands, section
from tests.deploy.test_compose import COMPOSE, GATEWAY, compose_plugin, service

PROFILE = "postgresql"
DATABASE = "postgres"
"""The database's service name, which is also its host name on the project's network."""
DATA_DIR = "/var/lib/postgresql/data"
"""Where the postgres image keeps its cluster."""
PASSWORD_VARIABLE = "PGPASSWORD"
"""Read by the gateway (config's storage.password falls back to it; asyncpg reads it too) and given to the server."""


def document() -> dict:
    return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))


def enabled(profiles: set[str]) -> set[str]:
    """The services Compose runs with these profiles active."""
    return {name for name, svc in document()["services"].items()
            if "profiles" not in svc or profiles & set(svc["profiles"])}  # fmt: skip


def docker_url() -> str:
    """The storage.url the README's PostgreSQL section gives for the Compose deployment."""
    found = set(re.findall(r"postgresql://[^\s`@]+@" + DATABASE + r"[^\s`|'\"]*", section("PostgreSQL")))
    assert len(found) == 1, f"the PostgreSQL section names one URL of the compose database, found {found}"
    return found.pop()


def test_the_default_profile_runs_the_gateway_alone_and_the_postgresql_profile_adds_the_database() -> None:
    assert enabled(set()) == {GATEWAY}, "docker compose up runs the gateway on SQLite, with no server"
    assert enabled({PROFILE}) == {GATEWAY, DATABASE}
    assert any(words[words.index("--profile") + 1] == PROFILE and "up" in words
               for words in commands(section("PostgreSQL"), "docker") if "--profile" in words), \
        "the README shows docker compose --profile postgresql up"  # fmt: skip


def test_the_database_is_postgres_15_with_its_data_in_a_named_volume() -> None:
    db, volumes = service(DATABASE), document()["volumes"]
    assert db["image"] == "postgres:15"
    (mount,) = db["volumes"]
    key, target = mount.split(":")[:2]
    assert target == DATA_DIR and key in volumes
    assert (volumes[key] or {}).get("name") == "switchboard-postgres", "a fixed name, wherever the file sits"
    assert db["restart"] == service()["restart"], "comes back with the gateway after a reboot"
    assert "ports" not in db, "reached from the gateway's network only"


def test_the_gateway_waits_until_the_database_answers_and_only_with_the_profile() -> None:
    dependency = service()["depends_on"][DATABASE]
    assert dependency["condition"] == "service_healthy"
    assert dependency["required"] is False, "without the profile the gateway starts alone"
    check = service(DATABASE)["healthcheck"]
    command = check["test"]
    assert command[0] == "CMD" and command[1] == "pg_isready"
    assert "--host=127.0.0.1" in command, "over TCP: the image's first-start server listens on the socket only"
    for key in ("interval", "timeout", "retries", "start_period"):
        assert key in check


def test_the_readme_url_names_this_server_its_role_and_database() -> None:
    url, environment = urlsplit(docker_url()), service(DATABASE)["environment"]
    assert url.scheme == "postgresql" and url.password is None
    assert url.hostname == DATABASE
    assert url.username == environment["POSTGRES_USER"]
    assert url.path.lstrip("/") == environment["POSTGRES_DB"]


def test_the_database_is_created_for_any_language() -> None:
    arguments = service(DATABASE)["environment"]["POSTGRES_INITDB_ARGS"].split()
    assert "--encoding=UTF8" in arguments
    assert "--locale=C.UTF-8" in arguments, "a UTF-8 LC_CTYPE: pg_trgm and ILIKE see letters beyond ASCII"


def secret_like(name: str) -> bool:
    return re.search(r"(?i)password|secret|token|key", name) is not None


def test_no_secret_is_written_in_the_file() -> None:
    text = COMPOSE.read_text(encoding="utf-8")
    for name, svc in document()["services"].items():
        environment = svc.get("environment", {})
        assert isinstance(environment, dict), f"{name}: environment as a mapping"
        for key, value in environment.items():
            if secret_like(key):
                assert re.fullmatch(r"\$\{[A-Z_][A-Z0-9_]*(:-)?\}", str(value)), \
                    f"{name}.{key} must come from deploy/.env (${{VARIABLE}}), not be written here"  # fmt: skip
    assert not re.search(r"(?i)postgres(ql)?://[^\s/@]*:[^\s/@]*@", text), "no password inside a URL"


def test_the_password_comes_from_deploy_env_to_both_the_gateway_and_the_server() -> None:
    gateway, db = service(), service(DATABASE)
    assert gateway["env_file"] == [".env"], "the gateway gets PGPASSWORD with the other secrets"
    assert PASSWORD_VARIABLE not in gateway.get("environment", {}), "nothing in the file hides deploy/.env's value"
    assert db["environment"]["POSTGRES_PASSWORD"] in (f"${{{PASSWORD_VARIABLE}}}", f"${{{PASSWORD_VARIABLE}:-}}")
    assert "env_file" not in db, "the database server gets its password, not the bot tokens and model keys"
    example = (COMPOSE.parent / ".env.example").read_text(encoding="utf-8")
    assert re.search(rf"^#?\s*{PASSWORD_VARIABLE}=$", example, flags=re.MULTILINE), "deploy/.env.example names it"


def test_docker_compose_gives_both_services_the_password_in_deploy_env(tmp_path: Path) -> None:
    """Compose itself resolves a copy of the file beside a .env holding PGPASSWORD: the gateway (env_file) and the
    server (${PGPASSWORD}) get that value, and nothing else of the file changes."""
    docker = compose_plugin()
    deploy = tmp_path / "deploy"
    deploy.mkdir()
    shutil.copy(COMPOSE, deploy / "docker-compose.yml")
    (deploy / ".env").write_text("PGPASSWORD=from-deploy-env\nTELEGRAM_BOT_TOKEN=123:abc\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != PASSWORD_VARIABLE and not k.startswith("COMPOSE_")}
    done = subprocess.run(
        [docker, "compose", "-f", str(deploy / "docker-compose.yml"), "--profile", PROFILE, "config", "--format", "json"],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    resolved = json.loads(done.stdout)["services"]
    assert resolved[GATEWAY]["environment"][PASSWORD_VARIABLE] == "from-deploy-env"
    assert resolved[DATABASE]["environment"]["POSTGRES_PASSWORD"] == "from-deploy-env"
    assert "TELEGRAM_BOT_TOKEN" not in resolved[DATABASE].get("environment", {})
