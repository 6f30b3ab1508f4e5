"""What a configuration would run, and what stops it from running.

``switchboard check`` prints the plan; ``switchboard run`` refuses to start
while it has blockers, naming exactly which variables or keys to set.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from config.loader import LoadedConfig
from config.models import Toggle


@dataclass(frozen=True, slots=True)
class PlatformPlan:
    name: str
    enabled: bool
    detail: str
    """For an enabled platform, how it connects; otherwise why it is off."""
    blocker: str | None = None
    """A misconfiguration that must be fixed before the gateway can run."""


@dataclass(frozen=True, slots=True)
class RunPlan:
    platforms: tuple[PlatformPlan, ...]
    blockers: tuple[str, ...]

    @property
    def enabled(self) -> list[str]:
        return [plan.name for plan in self.platforms if plan.enabled]

    @property
    def ready(self) -> bool:
        return not self.blockers


def build_plan(loaded: LoadedConfig, extra_platforms: Iterable[str] = ()) -> RunPlan:
    """Decide which platforms run and collect every blocker."""
    plans = (_telegram(loaded), _discord(loaded), _slack(loaded))
    blockers = [plan.blocker for plan in plans if plan.blocker]
    extra = list(extra_platforms)
    if not any(plan.enabled for plan in plans) and not extra and not blockers:
        blockers.append(_no_platform_message(loaded))
    model_blocker = _model_blocker(loaded)
    if model_blocker:
        blockers.append(model_blocker)
    return RunPlan(platforms=plans, blockers=tuple(blockers))


def _what(loaded: LoadedConfig, path: str) -> str:
    """What to set for a key: its variable (environment or .env) or the key itself (config.yaml)."""
    variable = loaded.variable_for(path)
    return f"{variable} or {path}" if variable else path


def _credential_plan(
    loaded: LoadedConfig, name: str, toggle: Toggle, required: dict[str, str | None], detail: str
) -> PlatformPlan:
    """Shared rule: off when disabled; auto turns on with any credential; on needs all of them."""
    if toggle is False:
        return PlatformPlan(name, False, "disabled in config (enabled: false)")
    missing = [path for path, value in required.items() if not value]
    present = len(missing) < len(required)
    if not missing:
        return PlatformPlan(name, True, detail)
    if toggle == "auto" and not present:
        return PlatformPlan(name, False, f"no credentials ({loaded.looked_for(missing, keys=False)})")
    needs = "; ".join(f"set {_what(loaded, path)}" for path in missing)
    reason = "is enabled" if toggle is True else "has only part of its credentials"
    return PlatformPlan(name, False, "incomplete credentials",
                        blocker=f"{name} {reason}: {needs} ({loaded.looked_for(missing)})")  # fmt: skip


def _telegram(loaded: LoadedConfig) -> PlatformPlan:
    cfg = loaded.settings.platforms.telegram
    required: dict[str, str | None] = {"platforms.telegram.token": cfg.token}
    if cfg.mode == "webhook":
        required["platforms.telegram.webhook_url"] = cfg.webhook_url
        required["platforms.telegram.webhook_secret"] = cfg.webhook_secret
        detail = f"webhook {cfg.webhook_url}, listening on {cfg.webhook_listen.host}:{cfg.webhook_listen.port}"
    else:
        detail = "long polling"
    if cfg.api_base_url:
        detail += f" via {cfg.api_base_url}"
    plan = _credential_plan(loaded, "telegram", cfg.enabled, required, detail)
    if plan.enabled and cfg.mode == "polling" and cfg.stall_timeout <= cfg.poll_timeout:
        # A healthy long poll answers only every poll_timeout seconds; a shorter stall limit restarts it forever.
        blocker = (f"telegram: platforms.telegram.stall_timeout ({cfg.stall_timeout:g} s) must be longer than "
                   f"poll_timeout ({cfg.poll_timeout} s); raise stall_timeout or lower poll_timeout")  # fmt: skip
        return PlatformPlan("telegram", False, "polling timeouts do not fit", blocker=blocker)
    return plan


def _discord(loaded: LoadedConfig) -> PlatformPlan:
    cfg = loaded.settings.platforms.discord
    intent = "message content intent on" if cfg.message_content_intent else "mentions and DMs only"
    detail = f"gateway connection, {intent}"
    if cfg.api_base_url or cfg.gateway_url:
        detail += f" via {cfg.api_base_url or 'discord.com'} / {cfg.gateway_url or 'gateway.discord.gg'}"
    return _credential_plan(loaded, "discord", cfg.enabled, {"platforms.discord.token": cfg.token}, detail)


def _slack(loaded: LoadedConfig) -> PlatformPlan:
    cfg = loaded.settings.platforms.slack
    required: dict[str, str | None] = {"platforms.slack.bot_token": cfg.bot_token}
    if cfg.mode == "socket":
        required["platforms.slack.app_token"] = cfg.app_token
        detail = "Socket Mode"
    else:
        required["platforms.slack.signing_secret"] = cfg.signing_secret
        listen = cfg.http_listen
        detail = f"HTTP events on {listen.host}:{listen.port}{listen.path}"
    if cfg.api_base_url:
        detail += f" via {cfg.api_base_url}"
    return _credential_plan(loaded, "slack", cfg.enabled, required, detail)


def _no_platform_message(loaded: LoadedConfig) -> str:
    home_env = loaded.home / ".env"
    tokens = ["platforms.telegram.token", "platforms.discord.token", "platforms.slack.bot_token", "platforms.slack.app_token"]
    return (
        "no platform is enabled: set TELEGRAM_BOT_TOKEN, or DISCORD_BOT_TOKEN, or SLACK_BOT_TOKEN with "
        f"SLACK_APP_TOKEN (in the environment or {home_env}), or the matching keys under platforms: in config.yaml "
        f"({loaded.looked_for(tokens, keys=False)})"
    )


def _model_blocker(loaded: LoadedConfig) -> str | None:
    model = loaded.settings.model
    if model.api_key or model.base_url:
        # A custom endpoint (a local OpenAI-compatible server) may need no key at all.
        return None
    return (f"no API key for the {model.provider} model {model.name!r}: set {_what(loaded, 'model.api_key')} "
            f"({loaded.looked_for(['model.api_key'])})")  # fmt: skip
