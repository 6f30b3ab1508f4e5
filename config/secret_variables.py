"""How a config section marks its secrets: which settings are secret, and the variable each is kept in.

A platform's section declares its own (``token: Annotated[Secret, SecretVariable("TELEGRAM_BOT_TOKEN")]``);
the loader reads those left unset from their variables, and masks every one in logs, output and backups.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel


@dataclass(frozen=True, slots=True)
class SecretVariable:
    """Marks a setting as a secret (masked in logs, in output and in backups) and names the environment variable
    it is conventionally kept in."""

    name: str
    fallback: bool = True
    """Left unset, the setting is read from the variable (the environment, then the home's .env). False: the
    variable is only the name the setting is masked by; config.yaml reads it through ``${VAR}`` if at all."""
    example: str = "..."
    """What a value looks like, for the commented line a new home's .env shows for the variable."""


def declared_secrets(model: type[BaseModel], prefix: str = "") -> dict[str, SecretVariable]:
    """Every setting of ``model`` marked with :class:`SecretVariable` (in sections within it too), by key path,
    in the order of the fields."""
    found: dict[str, SecretVariable] = {}
    for name, info in model.model_fields.items():
        path = prefix + name
        found.update((path, mark) for mark in info.metadata if isinstance(mark, SecretVariable))
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
            found.update(declared_secrets(info.annotation, f"{path}."))
    return found
