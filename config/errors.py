"""Configuration errors, phrased for the operator who has to fix the file.

Each problem names the key path, the bad value and what is allowed, e.g.
``compression.threshold: must be between 0 and 1, got 1.5``.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError


class ConfigError(Exception):
    """The configuration cannot be used. ``problems`` holds one line per problem."""

    def __init__(self, problems: Iterable[str], source: Path | None = None) -> None:
        self.problems = list(problems)
        self.source = source
        super().__init__(self.render())

    def render(self) -> str:
        where = f"in {self.source}" if self.source else "in the built-in defaults"
        count = len(self.problems)
        head = f"configuration error {where} ({count} problem{'s' if count != 1 else ''}):"
        return "\n".join([head, *(f"  - {line}" for line in self.problems)])


def describe_validation_error(
    error: ValidationError,
    model: type[BaseModel],
    unset_vars: Mapping[str, list[str]],
    describe_unset: Callable[[list[str]], str],
) -> list[str]:
    """Turn pydantic's errors into one readable line each. A value built from variables that had none says
    so, with where they were looked for (``describe_unset``)."""
    lines: list[str] = []
    for item in error.errors(include_url=False):
        loc = tuple(str(part) for part in item["loc"])
        # Errors from union members repeat the path with the member's type name; keep the key path.
        loc = tuple(part for part in loc if not _is_type_tag(part))
        path = ".".join(loc) or "(top level)"
        message = _message_for(item, loc, model)
        missing = unset_vars.get(path)
        if missing:
            message += f" ({describe_unset(missing)})"
        line = f"{path}: {message}"
        if line not in lines:
            lines.append(line)
    return lines


def _is_type_tag(part: str) -> bool:
    return part in {"str", "int", "float", "bool", "none", "literal['auto',True,False]"} or part.startswith(
        ("literal[", "function-after[")
    )


def _message_for(item: Mapping[str, Any], loc: tuple[str, ...], model: type[BaseModel]) -> str:
    kind = item["type"]
    value = item.get("input")
    ctx = item.get("ctx") or {}
    got = f", got {_show(value)}"
    if kind == "extra_forbidden":
        known = _field_names_at(model, loc[:-1])
        hint = _did_you_mean(loc[-1] if loc else "", known)
        allowed = f"; known keys here: {', '.join(sorted(known))}" if known and not hint else ""
        return f"unknown key{hint}{allowed}"
    if kind in {"out_of_range", "too_small"}:
        return f"{item['msg']}{got}"
    if kind in {"content_at_debug", "alert_platform", "storage_url"}:  # name the offending entries themselves
        return str(item["msg"])
    if kind == "literal_error":
        expected = str(ctx.get("expected", ""))
        options = [opt.strip().strip("'") for opt in expected.replace(" or ", ",").split(",") if opt.strip()]
        hint = _did_you_mean(str(value), options) if isinstance(value, str) else ""
        return f"must be {expected}{got}{hint}"
    if kind == "missing":
        return "is required"
    simple = {
        "int_parsing": "must be a whole number",
        "int_type": "must be a whole number",
        "int_from_float": "must be a whole number",
        "float_parsing": "must be a number",
        "float_type": "must be a number",
        "bool_parsing": "must be true or false",
        "bool_type": "must be true or false",
        "string_type": "must be text",
        "list_type": "must be a list",
        "model_type": "must be a mapping of keys to values",
        "model_attributes_type": "must be a mapping of keys to values",
        "dict_type": "must be a mapping of keys to values",
    }
    if kind in simple:
        return simple[kind] + got
    return f"{item['msg'][0].lower()}{item['msg'][1:]}{got}"


def _show(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return str(value)


def _field_names_at(model: type[BaseModel], loc: tuple[str, ...]) -> list[str]:
    current: Any = model
    for part in loc:
        fields = getattr(current, "model_fields", None)
        if not fields or part not in fields:
            return []
        current = fields[part].annotation
    fields = getattr(current, "model_fields", None)
    return list(fields) if fields else []


def _did_you_mean(word: str, options: Iterable[str]) -> str:
    matches = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f" (did you mean {matches[0]!r}?)" if matches else ""
