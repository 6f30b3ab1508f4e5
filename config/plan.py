"""What a configuration would run, and what stops it from running.

``switchboard check`` prints the plan; ``switchboard run`` refuses to start
while it has blockers, naming exactly which variables or keys to set. Each platform's
section (a :class:`config.models.PlatformSection`) says what it requires, how it connects
and which of its settings conflict; the rules here are the same for every platform.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from config.loader import LoadedConfig
from config.models import PlatformSection, Toggle
from config.secret_variables import declared_secrets


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
    plans = tuple(_platform_plan(loaded, name, section) for name, section in loaded.settings.platforms.sections())
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


def _platform_plan(loaded: LoadedConfig, name: str, section: PlatformSection) -> PlatformPlan:
    path = f"platforms.{name}"
    required = {f"{path}.{key}": getattr(section, key) for key in section.required()}
    plan = _credential_plan(loaded, name, section.enabled, required, section.connection())
    conflict = section.conflict(path) if plan.enabled else None
    if conflict is not None:
        return PlatformPlan(name, False, conflict.detail, blocker=f"{name}: {conflict.problem}")
    return plan


def _no_platform_message(loaded: LoadedConfig) -> str:
    """What would turn a platform on: each one's settings in its default mode, its variables where it has them."""
    ways: list[str] = []
    paths: list[str] = []
    for name, section in loaded.settings.platforms.sections():
        keys = type(section)().required()
        variables = declared_secrets(type(section))
        ways.append(" with ".join(variables[key].name if key in variables else f"platforms.{name}.{key}" for key in keys))
        paths += [f"platforms.{name}.{key}" for key in keys]
    return (
        f"no platform is enabled: set {', or '.join(way for way in ways if way)} (in the environment or "
        f"{loaded.home / '.env'}), or the matching keys under platforms: in config.yaml "
        f"({loaded.looked_for(paths, keys=False)})"
    )


def _model_blocker(loaded: LoadedConfig) -> str | None:
    model = loaded.settings.model
    if model.api_key or model.base_url:
        # A custom endpoint (a local OpenAI-compatible server) may need no key at all.
        return None
    return (f"no API key for the {model.provider} model {model.name!r}: set {_what(loaded, 'model.api_key')} "
            f"({loaded.looked_for(['model.api_key'])})")  # fmt: skip
