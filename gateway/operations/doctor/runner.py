"""Running the doctor's checks in order: local ones first, then the network ones side by side."""

from __future__ import annotations

import asyncio
from pathlib import Path

from config import ConfigError, LoadedConfig
from config.models import PLATFORMS
from config.plan import build_plan
from gateway.operations.doctor.local import config_check, config_error_check, database_check, disk_check, home_check
from gateway.operations.doctor.model import model_check
from gateway.operations.doctor.platforms import run_platform_check
from gateway.operations.doctor.results import Check
from gateway.operations.doctor.server_database import server_database_check
from gateway.operations.doctor.tool_servers import tool_server_checks
from gateway.operations.doctor.transcription import NAME as VOICE, transcription_check, transcription_skip
from gateway.operations.redaction import load_config_masked

LOCAL_NAMES = ("home", "database", "disk")


async def run_checks(config_path: Path | None, *, offline: bool) -> list[Check]:
    """Every check's result, in a fixed order. The secrets they may quote go to the process-wide redactor."""
    try:
        loaded = load_config_masked(config_path)
    except ConfigError as error:
        names = (*LOCAL_NAMES, *PLATFORMS, "model", VOICE)
        skipped = [Check.skip(name, "needs a valid configuration") for name in names]
        return [config_error_check(error), *skipped]
    checks = [config_check(loaded), home_check(loaded), await _database_check(loaded, offline=offline), disk_check(loaded)]
    checks += await _network_checks(loaded, offline=offline)
    checks += await tool_server_checks(loaded, offline=offline)
    return checks


async def _database_check(loaded: LoadedConfig, *, offline: bool) -> Check:
    """SQLite: the file, read here. PostgreSQL: the server, asked (not with --offline)."""
    if loaded.engine == "sqlite":
        return database_check(loaded)
    if offline:
        return Check.skip("database", f"--offline: the PostgreSQL server of {loaded.database_url} is not asked")
    return await server_database_check(loaded)


async def _network_checks(loaded: LoadedConfig, *, offline: bool) -> list[Check]:
    enabled = set(build_plan(loaded).enabled)
    pending: list[asyncio.Task[Check]] = []
    results: list[Check | asyncio.Task[Check]] = []
    for name in PLATFORMS:
        if offline:
            results.append(Check.skip(name, "--offline"))
        elif name not in enabled:
            results.append(Check.skip(name, "not enabled"))
        else:
            pending.append(asyncio.create_task(run_platform_check(name, loaded)))
            results.append(pending[-1])
    if offline:
        results.append(Check.skip("model", "--offline"))
        results.append(transcription_skip(loaded) or Check.skip(VOICE, "--offline"))
    else:
        pending += [asyncio.create_task(model_check(loaded)), asyncio.create_task(transcription_check(loaded))]
        results += pending[-2:]
    await asyncio.gather(*pending)
    return [item.result() if isinstance(item, asyncio.Task) else item for item in results]
