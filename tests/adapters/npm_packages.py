"""Installing the public npm emulators the tier2 tests run against, or skipping the test with the reason.

A package is installed into its own folder under ``.cache/`` on first use. Before npm is asked to install
anything, the registry it is configured with is probed once per session with a short timeout: npm itself
spends a minute or more retrying a registry it cannot reach, per package, before it gives up.
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

PROBE_TIMEOUT = 4.0
"""Seconds the registry has to answer the probe."""

INSTALL_TIMEOUT = 600
"""Seconds npm may take to install a package from a registry that answered the probe."""


def npm_settings(folder: Path) -> dict[str, str]:
    """The registry and proxies npm would use in ``folder`` (a project .npmrc there counts too)."""
    done = subprocess.run(["npm", "config", "get", "registry", "https-proxy", "proxy"],
                          cwd=folder, capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    settings = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    return {key: value for key, value in settings.items() if value and value != "null"}


@functools.cache
def registry_problem(registry: str, https_proxy: str | None = None, proxy: str | None = None) -> str | None:
    """Why npm cannot use ``registry``, or None when it answers; asked once per session and registry."""
    proxies = {scheme: url for scheme, url in (("https", https_proxy), ("http", proxy)) if url}
    opener = urllib.request.build_opener(*([urllib.request.ProxyHandler(proxies)] if proxies else []))
    try:
        with opener.open(urllib.request.Request(registry, method="GET"), timeout=PROBE_TIMEOUT):
            return None
    except urllib.error.HTTPError as error:  # any answer means it is there; a 5xx means it cannot serve
        return f"the npm registry {registry} answered {error.code} {error.reason}" if error.code >= 500 else None
    except (OSError, ValueError) as error:  # URLError, refused, timed out, no route, a malformed URL
        reason = getattr(error, "reason", None) or error
        return f"the npm registry {registry} is unreachable ({reason}; probed with a {PROBE_TIMEOUT:g} s timeout)"


def npm_install(spec: str, folder: Path) -> None:
    """``npm install spec`` in ``folder``; skips the calling test, with the reason, when that cannot be done."""
    if shutil.which("npm") is None:
        pytest.skip(f"npm is not installed, so {spec} cannot be fetched")
    folder.mkdir(parents=True, exist_ok=True)
    settings = npm_settings(folder)
    registry = settings.get("registry", "https://registry.npmjs.org/")
    problem = registry_problem(registry, settings.get("https-proxy"), settings.get("proxy"))
    if problem:
        pytest.skip(f"{problem}, so npm cannot install {spec}")
    manifest = folder / "package.json"
    if not manifest.exists():  # keeps npm from looking for a project further up
        manifest.write_text(json.dumps({"name": f"switchboard-{folder.name}", "private": True}) + "\n")
    try:
        done = subprocess.run(["npm", "install", "--no-audit", "--no-fund", spec],
                              cwd=folder, capture_output=True, text=True, timeout=INSTALL_TIMEOUT, check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as error:
        pytest.skip(f"npm install {spec} failed: {error}")
    if done.returncode != 0:
        pytest.skip(f"npm install {spec} failed: {done.stderr.strip()[-500:]}")
