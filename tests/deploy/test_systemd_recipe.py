"""README "Running with systemd": its paths agree with deploy/switchboard.service, and its recipe for running
a command as the service would works, for real, on the file layout and modes the README installs.

The recipe test creates a system user and rebases the unit's paths under a temporary directory; the venv
is a stand-in whose ``switchboard`` reports who it runs as and then runs this checkout's code. ``sudo`` is
replaced by a stand-in that behaves as it does for root (``-u USER`` switches with runuser, the environment
is reset), so the test needs no sudoers; it runs where it is root and util-linux's runuser is installed.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pytest

from tests.deploy.dockerfile import REPO
from tests.deploy.readme import section, shell_blocks
from tests.deploy.test_systemd_unit import UNIT
from tests.deploy.test_systemd_unit import section as unit_section

TOKEN = "123456:recipe-test-token-abcdefghijklmnop"
"""A Telegram token shaped like a real one, put into the environment file as an operator would."""


@dataclass(frozen=True)
class Service:
    """What deploy/switchboard.service says about how the gateway runs."""

    user: str
    home: PurePosixPath
    env_file: PurePosixPath
    binary: PurePosixPath
    umask: int
    state_mode: int

    @property
    def roots(self) -> list[PurePosixPath]:
        """The directories the README installs into: the env file's, the home, the venv's parent."""
        return [self.env_file.parent, self.home, self.binary.parents[2]]


def service() -> Service:
    unit = unit_section("Service")
    return Service(
        user=unit["User"],
        home=PurePosixPath(unit["Environment"].split("SWITCHBOARD_HOME=", 1)[1].split()[0]),
        env_file=PurePosixPath(unit["EnvironmentFile"].lstrip("-")),
        binary=PurePosixPath(unit["ExecStart"].split()[0]),
        umask=int(unit["UMask"], 8),
        state_mode=int(unit.get("StateDirectoryMode", "0755"), 8),
    )


def install_lines() -> list[list[str]]:
    """The commands of the README's install block, ``sudo`` dropped."""
    lines = [shlex.split(line, comments=True) for line in shell_blocks(section("Running with systemd"))[0].splitlines()]
    return [words[1:] if words[:1] == ["sudo"] else words for words in lines if words]


def recipe() -> str:
    """The README's block that runs a command as the service would."""
    (found,) = [block for block in shell_blocks(section("Running with systemd")) if " doctor" in block]
    return found


def only(lines: list[list[str]], program: str, *first: str) -> list[str]:
    (found,) = [words for words in lines if words[: 1 + len(first)] == [program, *first]]
    return found


def test_the_readme_installs_what_the_unit_runs() -> None:
    unit, lines = service(), install_lines()
    useradd = only(lines, "useradd")
    assert "--system" in useradd and useradd[-1] == unit.user
    assert useradd[useradd.index("--home-dir") + 1] == str(unit.home)
    assert only(lines, "install", "-d")[-1] == str(unit.env_file.parent)
    env_install = only(lines, "install", "-m", "600")
    assert env_install[-2:] == ["deploy/.env.example", str(unit.env_file)]
    assert (REPO / env_install[-2]).is_file()
    pip = next(words for words in lines if "pip" in PurePosixPath(words[0]).name)
    assert PurePosixPath(pip[0]).parent == unit.binary.parent, "pip installs into the venv the unit starts"
    assert only(lines, "cp") == ["cp", f"deploy/{UNIT.name}", "/etc/systemd/system/"]
    assert UNIT.stem in only(lines, "systemctl", "daemon-reload")


def test_the_recipe_sets_what_the_unit_sets() -> None:
    unit, text = service(), recipe()
    assert f"SWITCHBOARD_HOME={unit.home};" in text
    assert f". {unit.env_file};" in text
    assert text.index("SWITCHBOARD_HOME=") < text.index(f". {unit.env_file}"), (
        "systemd lets the EnvironmentFile override Environment=, so the file is read second"
    )
    umask = re.search(r"\bumask (\d+)", text)
    assert umask and int(umask.group(1), 8) == unit.umask
    assert re.search(rf"\s-u {re.escape(unit.user)}\s", text), "the command runs as the unit's User="
    assert f"{unit.binary} doctor" in text


@pytest.fixture
def system_user() -> Iterator[str]:
    """A name for a system user that does not exist yet; whatever the test creates under it is removed."""
    if os.geteuid() != 0:
        pytest.skip("creating a system user and a root-only file needs root")
    missing = [tool for tool in ("useradd", "userdel", "runuser", "install") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (shadow-utils / util-linux / coreutils)")
    name = f"sbrecipe{uuid.uuid4().hex[:8]}"
    yield name
    subprocess.run(["userdel", name], capture_output=True, check=False)


@pytest.fixture
def world() -> Iterator[Path]:
    """A root for the rebased paths that the service user can traverse (pytest's tmp_path is root-only)."""
    base = Path(tempfile.mkdtemp(prefix="sb-unit-"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def rebased(text: str, unit: Service, base: Path, user: str) -> str:
    """``text`` with the unit's directories moved under ``base`` and its user renamed."""
    for root in unit.roots:
        text = text.replace(str(root), f"{base}{root}")
    return re.sub(rf"(?<![\w/.-]){re.escape(unit.user)}(?![\w/.-])", user, text)


def stand_in_venv(unit: Service, base: Path, user: str) -> None:
    """The unit's switchboard, under ``base``: says who runs it and with which umask, then runs this checkout.

    The service user may not be able to run this venv's interpreter (pyenv under a 0700 /root), so the
    first interpreter of the same version it can run is used, without its own site-packages (``-S``),
    on this venv's site-packages.
    """
    site = next(Path(sys.prefix).glob("lib/python*/site-packages"))
    code = f"import site, sys; site.addsitedir({str(site)!r}); from gateway.operations.cli import main; sys.exit(main())"
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [sys.executable, shutil.which(f"python{version}"), f"/usr/bin/python{version}"]
    python, tried = None, []
    for candidate in dict.fromkeys(c for c in candidates if c):
        probe = subprocess.run(["runuser", "-u", user, "--", candidate, "-S", "-c", code, "--help"],
                               capture_output=True, text=True, cwd=base, check=False)  # fmt: skip
        if probe.returncode == 0:
            python = candidate
            break
        tried.append(f"{candidate}: {(probe.stderr.strip().splitlines() or ['exit ' + str(probe.returncode)])[-1]}")
    if python is None:
        pytest.skip(f"the service user cannot run Python {version} with this checkout ({'; '.join(tried)})")
    binary = Path(f"{base}{unit.binary}")
    binary.parent.mkdir(parents=True)
    binary.write_text(f'#!/bin/sh\necho "ran as $(id -un), umask $(umask)"\n'
                      f'exec {python} -S -c {shlex.quote(code)} "$@"\n')  # fmt: skip
    binary.chmod(0o755)


def stand_in_sudo(base: Path) -> Path:
    """A ``sudo`` for root: runs the command, as another user with ``-u``; returns the folder to put on PATH."""
    folder = base / "stand-in-bin"
    folder.mkdir()
    sudo = folder / "sudo"
    sudo.write_text('#!/bin/sh\n'
                    'if [ "$1" = -u ]; then user=$2; shift 2; exec runuser -u "$user" -- "$@"; fi\n'
                    'exec "$@"\n')  # fmt: skip
    sudo.chmod(0o755)
    return folder


def test_the_recipe_runs_a_command_as_the_service_would(system_user: str, world: Path) -> None:
    unit = service()
    env = {"PATH": f"{stand_in_sudo(world)}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
    # The README's install steps that lay out files (the venv, pip and systemctl steps are stood in for).
    for words in install_lines():
        if words[0] not in {"useradd", "install"}:
            continue
        command = shlex.split(rebased(shlex.join(words), unit, world, system_user))
        assert all(not arg.startswith("/") or arg.startswith(f"{world}/") or arg.endswith("nologin") for arg in command)
        subprocess.run(command, cwd=REPO, env=env, check=True)
    home = Path(f"{world}{unit.home}")  # what systemd's StateDirectory= makes at the first start
    home.mkdir(parents=True)
    shutil.chown(home, system_user, system_user)
    home.chmod(unit.state_mode)
    env_file = Path(f"{world}{unit.env_file}")
    for path, mode in ((env_file.parent, 0o700), (env_file, 0o600)):
        assert (path.stat().st_uid, stat.S_IMODE(path.stat().st_mode)) == (0, mode), f"{path} is root's alone"
    filled = env_file.read_text(encoding="utf-8")  # as an operator fills it in, the file staying root's
    for name, value in (("TELEGRAM_BOT_TOKEN", TOKEN), ("ANTHROPIC_API_KEY", "sk-ant-recipe")):
        filled = filled.replace(f"\n{name}=\n", f"\n{name}={value}\n")
    env_file.write_text(filled, encoding="utf-8")
    stand_in_venv(unit, world, system_user)

    script = rebased(recipe(), unit, world, system_user).replace(" doctor", " doctor --offline")
    done = subprocess.run(["sh", "-c", script], cwd=world, env=env, capture_output=True, text=True, check=False)

    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert f"ran as {system_user}, umask {unit.umask:04o}" in done.stdout
    assert "would start telegram" in done.stdout, "the token from the environment file reached the command"
    assert re.search(rf"^ok\s+home\s+{re.escape(str(home))} is 0700", done.stdout, flags=re.MULTILINE)
    assert TOKEN not in output
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600 and env_file.stat().st_uid == 0
