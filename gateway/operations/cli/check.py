"""``switchboard check``: validate the configuration and print what ``run`` would do.

It reads files only (no network, no platform libraries, the SQLite database untouched), with one
exception: when ``storage.url`` names a PostgreSQL server, it connects once to say whether it answers
(version, extensions, schema version). Exit 0 when ``run`` could start, 2 when the configuration is
invalid or incomplete, or the PostgreSQL server does not answer.
"""

from __future__ import annotations

import argparse
import asyncio

from config.loader import LoadedConfig
from config.plan import RunPlan, build_plan
from gateway.operations.alerts.webhook import masked_url
from gateway.operations.cli.common import EXIT_CONFIG, add_config_option, load_config_or_exit, show
from gateway.operations.doctor.results import Check, Status
from gateway.operations.doctor.server_database import server_database_check
from gateway.operations.tool_rules import tool_rule_warnings
from gateway.operations.version import version


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "check",
        help="validate the configuration and show what would run",
        description="Validate the configuration and print the plan, without network access.",
    )
    add_config_option(parser)
    parser.set_defaults(handler=check_command)


def check_command(args: argparse.Namespace) -> int:
    loaded = load_config_or_exit(args)
    plan = build_plan(loaded)
    server = asyncio.run(server_database_check(loaded)) if loaded.engine == "postgresql" else None
    show(render_plan(loaded, plan, server))
    return 0 if plan.ready and (server is None or server.status is Status.OK) else EXIT_CONFIG


def render_plan(loaded: LoadedConfig, plan: RunPlan, server: Check | None = None) -> str:
    """The plan; ``server``: what the PostgreSQL server said, when ``storage.url`` names one."""
    s = loaded.settings
    rows = [
        ("config file", str(loaded.config_path) if loaded.config_path else "none (built-in defaults)"),
        ("home", str(loaded.home)),
        ("database", _database_line(loaded, server)),
        (
            "log file",
            f"{loaded.log_path} ({s.logging.format}, level {s.logging.level}, "
            f"rotated at {s.logging.max_size_mb:g} MB x {s.logging.backups})",
        ),
        ("model", _model_line(loaded)),
        ("compression", _compression_line(loaded)),
        ("voice notes", _transcription_line(loaded)),
        ("health", f"http://{s.health.host}:{s.health.port}/health"),
        ("alerts", _alerts_line(loaded, plan)),
    ]
    width = max(len(label) for label, _ in rows)
    lines = [f"Switchboard {version()}: configuration is valid", ""]
    lines += [f"  {label.ljust(width)}  {value}" for label, value in rows]
    lines.append(f"  {'platforms'.ljust(width)}")
    for platform in plan.platforms:
        state = "on " if platform.enabled else "off"
        lines.append(f"    {platform.name.ljust(9)} {state}  {platform.detail}")
    lines.append("")
    if warnings := tool_rule_warnings(s):
        lines += ["Warnings:", *(f"  - {warning}" for warning in warnings), ""]
    blockers = [*plan.blockers]
    if server is not None and server.status is not Status.OK:
        blockers.append(f"{server.detail}; what to do: {server.fix}")
    if not blockers:
        lines.append(f"Ready: `switchboard run` would start {', '.join(plan.enabled)}.")
    else:
        lines.append("Not ready to run:")
        lines += [f"  - {blocker}" for blocker in blockers]
    return "\n".join(lines)


def _database_line(loaded: LoadedConfig, server: Check | None) -> str:
    if loaded.engine == "sqlite":
        return f"SQLite, {loaded.db_path} (synchronous={loaded.settings.storage.synchronous})"
    password = _password_source(loaded)
    if server is None:
        return f"PostgreSQL, {loaded.database_url} ({password})"
    answer = server.detail if server.status is Status.OK else "does not answer (see below)"
    return f"PostgreSQL, {loaded.database_url} ({password}): {answer}"


def _password_source(loaded: LoadedConfig) -> str:
    variable = loaded.variable_for("storage.password")
    if loaded.settings.storage.password:
        return f"password from {variable}" if variable else "password set in config.yaml"
    return "no password (the server must let the role in without one)"


def _model_line(loaded: LoadedConfig) -> str:
    model = loaded.settings.model
    variable = loaded.variable_for("model.api_key")
    if model.api_key:
        key = f"key from {variable}" if variable else "key set in config.yaml"
    else:
        key = "no key" + (f" ({loaded.looked_for(['model.api_key'], keys=False)})" if variable else "")
    endpoint = model.base_url or "the provider's default endpoint"
    window = f"{model.context_length:,} tokens" if model.context_length else "from the built-in model table"
    return f"{model.provider} / {model.name}, {key}, {endpoint}, context {window}, cache ttl {model.cache_ttl}"


def _compression_line(loaded: LoadedConfig) -> str:
    c = loaded.settings.compression
    if not c.enabled:
        return "off"
    return (
        f"agent compacts at {c.threshold:.0%} of the window, keeping {c.target_ratio:.0%} of that as tail "
        f"(at least {c.protect_last_n} messages); gateway hygiene at {c.hygiene_threshold:.0%}"
    )


def _transcription_line(loaded: LoadedConfig) -> str:
    media = loaded.settings.media
    t = media.transcription
    if not media.enabled:
        return "not read (media.enabled is false: users are told files are not read here)"
    if t is None:
        return "not transcribed (media.transcription is not set: users are told voice notes are not supported here)"
    variable = loaded.variable_for("media.transcription.api_key")
    if t.api_key:
        key = f"key from {variable}" if variable else "key set in config.yaml"
    elif t.base_url:
        key = "no key (fine for a local server)"
    else:
        key = f"no key, which OpenAI refuses ({loaded.looked_for(['media.transcription.api_key'])})"
    language = f"language {t.language}" if t.language else "language detected"
    return f"transcribed by {t.model} at {t.endpoint} ({language}, timeout {t.timeout:g} s), {key}"


def _alerts_line(loaded: LoadedConfig, plan: RunPlan) -> str:
    """Where operator alerts go: the chats, and each webhook by its host only (the URL and headers are secrets)."""
    a = loaded.settings.alerts
    shown = [target if target.partition(":")[0].strip() in plan.enabled else f"{target} (its platform is off: skipped)"
             for target in a.chats]  # fmt: skip
    for webhook in a.webhooks:
        names = ", ".join(webhook.headers)
        headers = f" with header{'s' if len(webhook.headers) != 1 else ''} {names}" if webhook.headers else ""
        shown.append(f"POST {masked_url(webhook.url)}{headers}")
    if not shown:
        return "nowhere (alerts.chats and alerts.webhooks are empty: problems show in /health, /metrics and the log)"
    return f"to {'; '.join(shown)}; at most {a.max_per_hour} an hour to each"
