"""Environment handling: the home's ``.env`` file and ``${VAR}`` substitution.

This module and ``config.loader`` are the only places that read the process
environment; everything else receives values through the loaded settings.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dotenv.parser import parse_stream

_REFERENCE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


@dataclass(frozen=True)
class DotenvFile:
    """The home's ``.env`` as read: ``KEY=value`` lines, ``#`` comments, quotes, ``export``, as python-dotenv
    parses them (values are taken literally: no ``${VAR}`` expansion inside ``.env``)."""

    path: Path
    values: dict[str, str] = field(default_factory=dict, repr=False)
    """Each variable's value; ``""`` for ``KEY=`` and a bare ``KEY``."""
    exists: bool = False
    unreadable: str | None = None
    """Why the file could not be read (its permissions, say)."""
    bad_lines: tuple[int, ...] = ()
    """Lines python-dotenv could not parse (skipped)."""


def read_dotenv(path: Path) -> DotenvFile:
    """Read a ``.env`` file; a missing file is empty, an unreadable one or bad lines are noted, never fatal."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return DotenvFile(path)
    except (OSError, UnicodeDecodeError) as error:
        return DotenvFile(path, exists=True, unreadable=getattr(error, "strerror", None) or str(error))
    values: dict[str, str] = {}
    bad_lines: list[int] = []
    # parse_stream is what python-dotenv's dotenv_values() reads with; called directly for the numbers of
    # the lines it cannot parse (dotenv_values only logs them).
    for binding in parse_stream(io.StringIO(text)):
        if binding.error:
            bad_lines.append(binding.original.line)
        elif binding.key is not None:
            values[binding.key] = binding.value or ""
    return DotenvFile(path, values, exists=True, bad_lines=tuple(bad_lines))


def merged_environment(process_env: Mapping[str, str], dotenv: DotenvFile) -> dict[str, str]:
    """The variables with a value: the process environment's, then ``.env``'s for the rest. A variable the
    environment has empty (``TELEGRAM_BOT_TOKEN=`` from an unfilled env file) counts as not set there."""
    merged = {key: value for key, value in dotenv.values.items() if value.strip()}
    merged.update((key, value) for key, value in process_env.items() if value.strip())
    return merged


def describe_lookup(names: Sequence[str], states: Mapping[str, str]) -> str:
    """``names`` with their :func:`lookup_state` (from ``states``), those alike together:
    ``SLACK_BOT_TOKEN and SLACK_APP_TOKEN are empty in the environment and not in /home/you/.switchboard/.env``."""
    grouped: dict[str, list[str]] = {}
    for name in dict.fromkeys(names):
        grouped.setdefault(states.get(name, "set"), []).append(name)
    return "; ".join(f"{listing(group)} {'is' if len(group) == 1 else 'are'} {state}" for state, group in grouped.items())


def listing(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def lookup_state(name: str, process_env: Mapping[str, str], dotenv: DotenvFile) -> str:
    """Where a variable without a value was looked for and what was there: ``empty in the environment and
    not in /home/you/.switchboard/.env``."""
    env = "empty in the environment" if name in process_env else "not set in the environment"
    path = dotenv.path
    if not dotenv.exists:
        return f"{env} and there is no {path}"
    if dotenv.unreadable is not None:
        return f"{env} and {path} cannot be read ({dotenv.unreadable})"
    if name in dotenv.values:
        return f"{env} and {'empty ' if name not in process_env else ''}in {path}"
    skipped = f" (python-dotenv could not parse its line {', '.join(map(str, dotenv.bad_lines))})" if dotenv.bad_lines else ""
    if name not in process_env:
        return f"set neither in the environment nor in {path}{skipped}"
    return f"{env} and not in {path}{skipped}"


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
