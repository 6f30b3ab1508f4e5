"""Asking each enabled platform whether its credentials are good, without starting its adapter.

Each platform's package has a ``probe`` module (``adapters.<name>.probe``) that makes
one documented read-only call with plain aiohttp (``getMe``, ``GET /users/@me``,
``auth.test`` ...); no platform library is imported (they take seconds to load).
The token travels only in the request; anything printed is redacted by the caller.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Awaitable, Callable
from typing import Any, Final

import aiohttp

from adapters.contract import Probe, Where
from config import LoadedConfig
from gateway.operations.doctor.results import Check

PlatformProbe = Callable[[Any, aiohttp.ClientSession, Where], Awaitable[Probe]]

TIMEOUT: Final = aiohttp.ClientTimeout(total=10)


async def run_platform_check(name: str, loaded: LoadedConfig) -> Check:
    """One platform's check, with network failures turned into a FAIL line."""
    probe = platform_probe(name)
    if probe is None:
        return Check.skip(name, "this platform has no credential check")
    section = loaded.settings.platforms.section(name)
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        try:
            found = await probe(section, session, lambda key: _where(loaded, name, key))
        except (aiohttp.ClientError, asyncio.TimeoutError) as error:
            reason = str(error) or type(error).__name__
            return Check.fail(name, f"could not reach the {name} API: {reason}",
                              "check this machine's network, DNS and proxy, and api_base_url if you set one")  # fmt: skip
    return Check.ok(name, found.detail) if found.ok else Check.fail(name, found.detail, found.fix)


def platform_probe(name: str) -> PlatformProbe | None:
    """The ``probe`` function of ``adapters.<name>.probe``; None when the platform's package has none."""
    module_name = f"adapters.{name}.probe"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name in (module_name, f"adapters.{name}"):
            return None
        raise
    probe: PlatformProbe = module.probe
    return probe


def _where(loaded: LoadedConfig, platform: str, key: str) -> str:
    path = f"platforms.{platform}.{key}"
    variable = loaded.variable_for(path)
    return f"{variable} (environment or {loaded.home / '.env'})" if variable else f"{path} in config.yaml"
