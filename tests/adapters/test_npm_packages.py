"""The tier2 emulators' install: an npm registry out of reach skips the test, with the reason, before
``npm install`` runs; a registry that answers gets the install; the registry is probed once per session.

Each test points npm at a registry of its own (``npm_config_registry``, as an operator's .npmrc would) and
puts a stand-in ``npm`` first on PATH that writes down its arguments and runs the real one.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType

import pytest

from tests.adapters.slack import test_local_slack as slack_tier2
from tests.adapters.telegram import test_tier2_npm_emulator as telegram_tier2

ENTRY_POINTS = [pytest.param(telegram_tier2, "installed_package", id="telegram-test-api"),
                pytest.param(slack_tier2, "installed_binary", id="local-slack")]  # fmt: skip
"""Where each tier2 test gets its emulator, and the module whose CACHE it installs into."""


@pytest.fixture
def npm_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[], list[str]]:
    """The stand-in npm on PATH; returns a function giving the argument lists npm was run with so far."""
    real = shutil.which("npm")
    if real is None or shutil.which("node") is None:
        pytest.skip("node and npm are needed to install the tier2 emulators")
    folder, log = tmp_path / "bin", tmp_path / "npm.log"
    folder.mkdir()
    (folder / "npm").write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {real} "$@"\n', encoding="utf-8")
    (folder / "npm").chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return lambda: log.read_text(encoding="utf-8").splitlines() if log.exists() else []


def use_registry(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("npm_config_registry", url)


def install_from(module: ModuleType, name: str, cache: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a tier2 test's install into ``cache``; the reason it skipped with (it must skip here)."""
    monkeypatch.setattr(module, "CACHE", cache)
    with pytest.raises(pytest.skip.Exception) as skipped:
        getattr(module, name)()
    return str(skipped.value)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def registry(status: int) -> Iterator[tuple[str, list[str]]]:
    """A local registry answering ``status`` at its root and 404 for any package; yields its URL and the paths asked."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            asked.append(self.path)
            self.send_response(status if self.path == "/" else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", asked
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(("module", "name"), ENTRY_POINTS)
def test_an_unreachable_registry_skips_before_npm_install(
    module: ModuleType, name: str, npm_runs: Callable[[], list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"http://127.0.0.1:{closed_port()}/"
    use_registry(monkeypatch, url)

    reason = install_from(module, name, tmp_path / "cache", monkeypatch)

    assert f"the npm registry {url} is unreachable" in reason
    assert [run for run in npm_runs() if run.startswith("install")] == []
    assert not (tmp_path / "cache" / "node_modules").exists()


def test_a_registry_that_answers_gets_the_install(npm_runs: Callable[[], list[str]], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    with registry(200) as (url, asked):
        use_registry(monkeypatch, url)
        reason = install_from(telegram_tier2, "installed_package", tmp_path / "cache", monkeypatch)

    assert f"install --no-audit --no-fund telegram-test-api@{telegram_tier2.VERSION}" in npm_runs()
    assert "/telegram-test-api" in asked, "npm asked this registry for the package"
    assert reason.startswith(f"npm install telegram-test-api@{telegram_tier2.VERSION} failed"), reason


def test_the_registry_is_probed_once_per_session(npm_runs: Callable[[], list[str]], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    with registry(503) as (url, asked):
        use_registry(monkeypatch, url)
        reasons = [install_from(module.values[0], module.values[1], tmp_path / module.id, monkeypatch)
                   for module in ENTRY_POINTS]  # fmt: skip

    assert asked == ["/"]
    assert all(f"the npm registry {url} answered 503" in reason for reason in reasons), reasons
    assert [run for run in npm_runs() if run.startswith("install")] == []
