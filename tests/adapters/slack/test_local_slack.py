"""Tier 2: the gateway against the public local-slack emulator (npm ``local-slack-linux-x64``).

local-slack binds 0.0.0.0, so each run happens inside ``unshare -n`` (a
network namespace with only loopback, brought up first). The emulator, the
fake model server and the gateway run together in
:mod:`tests.adapters.slack.local_slack_driver`, which reports what the
emulator saw as JSON. Run only these with ``pytest -m tier2``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.adapters.npm_packages import npm_install

pytestmark = pytest.mark.tier2

REPO = Path(__file__).resolve().parents[3]
PACKAGE = "local-slack-linux-x64@0.1.8"
CACHE = REPO / ".cache" / "npm-local-slack"
BINARY = Path("node_modules", "local-slack-linux-x64", "bin", "local-slack")
"""Where npm puts the emulator, inside CACHE."""


def _skip_unless(condition: bool, reason: str) -> None:
    if not condition:
        pytest.skip(reason)


@pytest.fixture(scope="module")
def local_slack() -> Path:
    """The emulator binary, installed into .cache/npm-local-slack on first use."""
    _skip_unless(sys.platform == "linux", "local-slack-linux-x64 runs on Linux only")
    _skip_unless(shutil.which("unshare") is not None and shutil.which("ip") is not None,
                 "needs unshare and ip (util-linux, iproute2) to keep local-slack off the network")  # fmt: skip
    probe = subprocess.run(["unshare", "-n", "sh", "-c", "ip link set lo up"], capture_output=True, text=True)
    _skip_unless(probe.returncode == 0,
                 f"cannot create a network namespace (needs root or user namespaces): {probe.stderr.strip()}")  # fmt: skip
    return installed_binary()


def installed_binary() -> Path:
    """The emulator binary, installed into CACHE on first use; skips the test when that is not possible."""
    binary = CACHE / BINARY
    if not binary.exists():
        npm_install(PACKAGE, CACHE)
        _skip_unless(binary.exists(), f"npm install {PACKAGE} left no {BINARY}")
    return binary


def run_driver(binary: Path, mode: str, workdir: Path) -> dict[str, Any]:
    command = (
        f"ip link set lo up && exec {sys.executable} -m tests.adapters.slack.local_slack_driver "
        f"--binary {binary} --mode {mode} --workdir {workdir}"
    )
    done = subprocess.run(
        ["unshare", "-n", "sh", "-c", command], cwd=REPO, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 0, f"driver failed:\n{done.stderr[-3000:]}\n{done.stdout[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("mode", ["socket", "events"])
def test_mention_and_dm_against_local_slack(local_slack: Path, tmp_path: Path, mode: str) -> None:
    result = run_driver(local_slack, mode, tmp_path)
    mention = result["mention_reply"]
    assert mention["thread_ts"] == result["root_ts"], "the reply must open a thread under the mention"
    # A channel thread is shared: the model saw the sender's name (from users.info) before the text.
    assert mention["text"].startswith("ok: alice: hello emulator")
    assert result["dm_reply"]["channel"] == result["dm_channel"]
    assert result["dm_reply"]["text"] == "ok: hello in private"
    # local-slack sends a channel mention both as `message` and as `app_mention`: still one turn, one post.
    assert result["model_requests"] == 2
    assert result["web_api_calls"].count("chat.postMessage") == 2
