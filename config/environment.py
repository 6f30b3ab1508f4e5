"""Environment handling: the home's ``.env`` file and ``${VAR}`` substitution.

This module and ``config.loader`` are the only places that read the process
environment; everything else receives values through the loaded settings.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_REFERENCE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_DOTENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")


def read_dotenv(path: Path) -> dict[str, str]:
    """Parse a ``.env`` file: ``KEY=value`` lines, ``#`` comments, optional quotes and ``export``."""
    values: dict[str, str] = {}
    if not path.is_file():
        return values
    for raw in path.read_text(encoding="utf-8").splitlines():
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        match = _DOTENV_LINE.match(raw)
        if match is None:
            continue
        key, value = match.groups()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        values[key] = value
    return values


def merged_environment(process_env: Mapping[str, str], dotenv: Mapping[str, str]) -> dict[str, str]:
    """Values from ``.env`` fill in what the process environment does not already set."""
    return {**dotenv, **process_env}


@dataclass
class Substitution:
    """The result of expanding ``${VAR}`` references through a parsed YAML document."""

    data: Any
    sources: dict[str, list[str]] = field(default_factory=dict)
    """Key path -> the variables its value was built from."""
    unset: dict[str, list[str]] = field(default_factory=dict)
    """Key path -> referenced variables that were not set and had no default."""


def substitute(document: Any, environ: Mapping[str, str]) -> Substitution:
    """Replace ``${VAR}`` / ``${VAR:-default}`` in every string value; ``$$`` is a literal ``$``."""
    result = Substitution(data=None)
    result.data = _walk(document, environ, (), result)
    return result


def _walk(node: Any, environ: Mapping[str, str], path: tuple[str, ...], result: Substitution) -> Any:
    if isinstance(node, dict):
        return {key: _walk(value, environ, (*path, str(key)), result) for key, value in node.items()}
    if isinstance(node, list):
        return [_walk(item, environ, (*path, str(index)), result) for index, item in enumerate(node)]
    if isinstance(node, str) and "$" in node:
        return _expand(node, environ, ".".join(path), result)
    return node


def _expand(text: str, environ: Mapping[str, str], dotted: str, result: Substitution) -> str:
    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name, default = match.group(1), match.group(2)
        result.sources.setdefault(dotted, []).append(name)
        value = environ.get(name)
        if value:
            return value
        if default is not None:
            return default
        result.unset.setdefault(dotted, []).append(name)
        return ""

    return _REFERENCE.sub(replace, text)
