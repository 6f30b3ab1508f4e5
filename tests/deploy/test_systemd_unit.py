"""deploy/switchboard.service: restarts, stops after the drain timeout, hardened, and verifiable by systemd."""

from __future__ import annotations

import configparser
import shutil
import subprocess
from pathlib import Path

import pytest

from config.models import GatewayConfig
from tests.deploy.dockerfile import REPO

UNIT = REPO / "deploy" / "switchboard.service"


def section(name: str) -> dict[str, str]:
    parser = configparser.ConfigParser(interpolation=None, strict=False, delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # systemd keys are case-sensitive
    parser.read_string(UNIT.read_text(encoding="utf-8"))
    return dict(parser[name])


def test_starts_switchboard_run_as_its_own_user() -> None:
    service = section("Service")
    assert service["ExecStart"].split()[1:] == ["run"]
    assert Path(service["ExecStart"].split()[0]).name == "switchboard"
    assert service["User"] not in {"root", "0"}
    assert "SWITCHBOARD_HOME=" in service["Environment"]
    assert service["EnvironmentFile"].lstrip("-").startswith("/")


def test_always_restarts_and_outlasts_the_drain_timeout() -> None:
    service = section("Service")
    assert service["Restart"] == "always"
    assert float(service["TimeoutStopSec"]) > GatewayConfig().drain_timeout
    assert service.get("KillSignal", "SIGTERM") in {"SIGTERM", "SIGINT"}, "the gateway drains on SIGTERM/SIGINT"


def test_does_not_restart_a_start_the_configuration_stops() -> None:
    """Exit status 2 (gateway/runner.py: missing credentials, a taken port, another gateway on the home) would
    fail again on every restart: systemd leaves the unit failed with the reason in the journal instead."""
    assert "2" in section("Service")["RestartPreventExitStatus"].split()


def test_is_hardened_and_can_only_write_its_state_directory() -> None:
    service = section("Service")
    assert service["NoNewPrivileges"] == "yes"
    assert service["ProtectSystem"] == "strict"
    assert service["ProtectHome"] == "yes"
    assert service["UMask"] == "0077"
    home = service["Environment"].split("SWITCHBOARD_HOME=", 1)[1].split()[0]
    assert home == f"/var/lib/{service['StateDirectory']}"
    assert home in service["ReadWritePaths"].split()


def test_waits_for_the_network_and_is_wanted_at_boot() -> None:
    assert "network-online.target" in section("Unit")["After"]
    assert section("Install")["WantedBy"] == "multi-user.target"


def test_starts_after_a_postgresql_server_on_the_same_machine() -> None:
    assert "postgresql.service" in section("Unit")["After"].split()
    assert "postgresql.service" not in section("Unit").get("Wants", ""), "SQLite needs no server: nothing pulled in"


def test_systemd_analyze_verify_accepts_it(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    unit = tmp_path / UNIT.name
    unit.write_text(UNIT.read_text(encoding="utf-8"), encoding="utf-8")
    done = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60)
    # The venv does not exist on a test machine; everything else must be clean.
    problems = [line for line in (done.stdout + done.stderr).splitlines()
                if line.strip() and "is not executable" not in line]  # fmt: skip
    assert problems == []
