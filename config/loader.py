"""Load ``config.yaml`` into typed settings, once.

Order: the home's ``.env`` is read (it never overrides variables already set,
but fills in those set empty), ``${VAR}`` references are expanded, the document is validated, and secrets
left unset fall back to their conventional variables: the model's key to its provider's
(``ANTHROPIC_API_KEY``), a platform's secrets to the variables its section declares on them
(:class:`config.secret_variables.SecretVariable`). Every problem is collected before anything fails.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from config.environment import describe_lookup, listing, lookup_state, merged_environment, read_dotenv, substitute
from config.errors import ConfigError, describe_validation_error
from config.home import ensure_home, resolve_home
from config.models import Settings
from config.secret_variables import declared_secrets

EXAMPLE_PATH = Path(__file__).with_name("config.example.yaml")

MODEL_KEY_VARIABLES: dict[str, str] = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
"""The variable each provider's key is conventionally kept in (a model's key depends on its provider)."""
MODEL_SECRET_PATHS: tuple[str, ...] = ("model.api_key", "auxiliary.compression.api_key")
"""The model's secrets; the other secrets are the ones the sections declare, and the fallback models' keys."""
TRANSCRIPTION_KEY = "media.transcription.api_key"
"""The transcription endpoint's key, a secret when ``media.transcription`` is set; unset, it is OPENAI_API_KEY's."""


def fallback_variables(settings_model: type[Settings] = Settings) -> dict[str, str]:
    """Key path -> the variable a secret left unset is read from, as the sections declare (the model's aside)."""
    return {path: mark.name for path, mark in declared_secrets(settings_model).items() if mark.fallback}


@dataclass(frozen=True)
class LoadedConfig:
    """Validated settings plus where they came from."""

    settings: Settings
    home: Path
    config_path: Path | None
    """The file that was read, or None when the built-in defaults were used."""
    variables: dict[str, list[str]] = field(default_factory=dict)
    """Key path -> environment variables its value came from (or would come from)."""
    referenced: frozenset[str] = frozenset()
    """Key paths whose value in the config file is built from ``${VAR}`` references."""
    unset_variables: dict[str, str] = field(default_factory=dict)
    """Variable without a value -> where it was looked for and what was there (``empty in the environment
    and not in /home/you/.switchboard/.env``), for messages that say a value is missing."""

    def under_home(self, raw: str) -> Path:
        path = Path(os.path.expanduser(raw))
        return path if path.is_absolute() else self.home / path

    @property
    def engine(self) -> str:
        """The storage engine ``storage.url`` chooses: ``sqlite`` or ``postgresql``."""
        return self.settings.storage.location.engine

    @property
    def db_path(self) -> Path:
        """The SQLite file (``storage.url`` or ``storage.path``); with PostgreSQL, where it would be (unused)."""
        location = self.settings.storage.location
        return self.under_home(location.target if location.engine == "sqlite" else self.settings.storage.path)

    @property
    def database_url(self) -> str:
        """What ``storage.open_store`` opens: the SQLite file's absolute path, or the PostgreSQL URL (which holds no
        password: that is ``settings.storage.password``)."""
        location = self.settings.storage.location
        return str(self.db_path) if location.engine == "sqlite" else location.target

    @property
    def log_path(self) -> Path:
        return self.under_home(self.settings.logging.file)

    @property
    def memories_dir(self) -> Path:
        return self.home / "memories"

    @property
    def media_dir(self) -> Path:
        """The media folder: the photos and documents users sent, by SHA-256 (``storage.MediaFolder``)."""
        return self.home / "media"

    @property
    def soul_path(self) -> Path:
        return self.home / "SOUL.md"

    def variable_for(self, path: str) -> str | None:
        """The environment variable a key's value comes from, if any."""
        names = self.variables.get(path)
        return names[0] if names else None

    def looked_for(self, paths: Sequence[str], *, keys: bool = True) -> str:
        """Where the values of ``paths`` (none found) were looked for and what was there: their variables in
        the environment and the home's .env, and, with ``keys``, the keys in the config file."""
        names = [name for path in paths for name in self.variables.get(path, [])]
        parts = [describe_lookup(names, self.unset_variables)] if names else []
        if keys:
            config = self.config_path or self.home / "config.yaml"
            absent = [path for path in paths if path not in self.referenced]
            if absent and self.config_path is None:
                parts.append(f"there is no {config}")
            elif absent:
                parts.append(f"{listing(absent)} {'is' if len(absent) == 1 else 'are'} not in {config}")
            parts += [f"{path} in {config} refers to {listing(['${' + n + '}' for n in self.variables[path]])}"
                      for path in paths if path in self.referenced]  # fmt: skip
        return "; ".join(parts)

    def secret_paths(self) -> list[str]:
        """The key path of every secret setting, the fallback models' keys included (by index)."""
        fallbacks = (f"model.fallbacks.{index}.api_key" for index in range(len(self.settings.model.fallbacks)))
        transcription = [TRANSCRIPTION_KEY] if self.settings.media.transcription is not None else []
        webhooks = [
            f"alerts.webhooks.{index}.{key}" for index, webhook in enumerate(self.settings.alerts.webhooks)
            for key in ("url", *(f"headers.{name}" for name in webhook.headers))
        ]  # fmt: skip
        servers = [
            f"tools.mcp_servers.{index}.{key}" for index, server in enumerate(self.settings.tools.mcp_servers)
            for key in (*(f"env.{name}" for name in server.env), *(f"headers.{name}" for name in server.headers))
        ]  # fmt: skip
        return [*MODEL_SECRET_PATHS, *declared_secrets(type(self.settings)), *fallbacks, *transcription, *webhooks,
                *servers]

    def secrets(self) -> list[str]:
        """Every configured secret value, for log redaction."""
        values = [get_path(self.settings, path) for path in self.secret_paths()]
        return [value for value in values if isinstance(value, str) and value]


def example_config_text() -> str:
    return EXAMPLE_PATH.read_text(encoding="utf-8")


def load_config(
    config_path: Path | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    create_home: bool = False,
    settings_model: type[Settings] = Settings,
) -> LoadedConfig:
    """Read and validate the configuration. Raises ConfigError with every problem found.

    With ``create_home`` the home directory is laid out first (0700, with a
    commented config.yaml and .env), as ``switchboard run`` does on first start.
    ``settings_model`` is the shape validated against: :class:`Settings`, or a subclass
    with a platform only a test defines.
    """
    process_env = os.environ if environ is None else environ
    home = resolve_home(process_env)
    if create_home:
        ensure_home(home, config_template=example_config_text())
    dotenv = read_dotenv(home / ".env")
    env = merged_environment(process_env, dotenv)
    path = config_path if config_path is not None else home / "config.yaml"
    if config_path is not None and not path.is_file():
        raise ConfigError([f"config file not found: {path}"], source=path)
    document = _read_yaml(path) if path.is_file() else {}
    expanded = substitute(document, env)

    def unset(names: Sequence[str]) -> dict[str, str]:
        return {name: lookup_state(name, process_env, dotenv) for name in names if name not in env}

    def missing(names: Sequence[str]) -> str:
        return describe_lookup(names, unset(names))

    try:
        settings = settings_model.model_validate(expanded.data)
    except ValidationError as error:
        raise ConfigError(describe_validation_error(error, settings_model, expanded.unset, missing), source=path) from None
    variables = {key: list(names) for key, names in expanded.sources.items()}
    settings = _fill_secret_fallbacks(settings, env, variables)
    return LoadedConfig(
        settings=settings,
        home=home,
        config_path=path if path.is_file() else None,
        variables=variables,
        referenced=frozenset(expanded.sources),
        unset_variables=unset([name for names in variables.values() for name in names]),
    )


def home_environment(home: Path, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables ``${VAR}`` references see: the process environment, filled in from the home's .env
    (also where the environment has them empty)."""
    return merged_environment(os.environ if environ is None else environ, read_dotenv(home / ".env"))


def environment_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """The secrets in their conventional variables, for masking output when the configuration cannot be loaded."""
    process_env = os.environ if environ is None else environ
    env = home_environment(resolve_home(process_env), process_env)
    names = [*(mark.name for mark in declared_secrets(Settings).values()), *MODEL_KEY_VARIABLES.values()]
    return [env[name] for name in names if env.get(name)]


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError([f"cannot read the file: {error.strerror}"], source=path) from None
    try:
        document = yaml.safe_load(text)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = error.problem or error.context or "the YAML is not valid"
        raise ConfigError([f"{where}{problem}"], source=path) from None
    except yaml.YAMLError as error:
        raise ConfigError([f"the YAML is not valid: {error}"], source=path) from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise ConfigError(["the top level must be a mapping of sections (model:, platforms:, ...)"], source=path)
    return document


def _fill_secret_fallbacks(
    settings: Settings, env: Mapping[str, str], variables: dict[str, list[str]]
) -> Settings:
    fallbacks = fallback_variables(type(settings))
    fallbacks["model.api_key"] = MODEL_KEY_VARIABLES[settings.model.provider]
    if settings.media.transcription is not None:
        fallbacks[TRANSCRIPTION_KEY] = MODEL_KEY_VARIABLES[settings.media.transcription.provider]
    for path, name in fallbacks.items():
        if get_path(settings, path) is not None:
            continue
        names = variables.setdefault(path, [])
        if name not in names:
            names.append(name)  # after a ${VAR} the key named that was empty: both were looked for
        value = env.get(name)
        if value:
            settings = set_path(settings, path, value)
    return _fill_fallback_keys(settings, env)


def _fill_fallback_keys(settings: Settings, env: Mapping[str, str]) -> Settings:
    """Fallback models without a key use the main key (same provider) or their provider's variable."""
    main = settings.model
    filled = []
    for fallback in main.fallbacks:
        if fallback.api_key is None:
            key = main.api_key if fallback.provider == main.provider else env.get(MODEL_KEY_VARIABLES[fallback.provider])
            fallback = fallback.model_copy(update={"api_key": key or None})
        filled.append(fallback)
    return set_path(settings, "model.fallbacks", filled)


def conventional_variable(settings: Settings, path: str) -> str | None:
    """The variable a secret setting is conventionally kept in: a model key's depends on its provider."""
    if path == "model.api_key":
        return MODEL_KEY_VARIABLES[settings.model.provider]
    if path.startswith("model.fallbacks.") or path == TRANSCRIPTION_KEY:
        return MODEL_KEY_VARIABLES[get_path(settings, path.rpartition(".")[0]).provider]
    mark = declared_secrets(type(settings)).get(path)
    return mark.name if mark else None


def get_path(model: BaseModel, dotted: str) -> Any:
    """The value at a dotted key path; a number picks an item of a list (``model.fallbacks.0.api_key``), and
    in a mapping the rest of the path is the key (``alerts.webhooks.0.headers.X-Api.Key``)."""
    value: Any = model
    parts = dotted.split(".")
    for index, part in enumerate(parts):
        if isinstance(value, dict):
            return value[".".join(parts[index:])]
        value = value[int(part)] if isinstance(value, list) else getattr(value, part)
    return value


def set_path(model: BaseModel, dotted: str, value: Any) -> Any:
    """A copy of a frozen model with one nested value replaced."""
    head, _, rest = dotted.partition(".")
    if not rest:
        return model.model_copy(update={head: value})
    return model.model_copy(update={head: set_path(getattr(model, head), rest, value)})
