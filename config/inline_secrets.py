"""A copy of config.yaml without the secrets written in it, for backups.

A secret key (``platforms.telegram.token``, ``model.api_key``, ...) whose value is written
inline instead of as a ``${VAR}`` reference gets a reference in the copy, to the variable
that conventionally holds it (``${TELEGRAM_BOT_TOKEN}``); a configured secret met anywhere
else in the file (inside a URL, in a comment) gets the same. Everything else, comments
included, stays as written. The copy is checked: with those variables set it must load to
the same configuration, or :class:`ConfigError` says to move the secrets to ``.env``.

A variable is only used for a value it would give back: when the environment already holds
something else under the conventional name, or another secret took it, the copy refers to
``SWITCHBOARD_<KEY>`` instead (``SWITCHBOARD_MODEL_FALLBACKS_0_API_KEY``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import yaml

from config.environment import substitute
from config.errors import ConfigError
from config.loader import LoadedConfig, conventional_variable, get_path, home_environment

_REFERENCE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")
_MIN_LENGTH = 6
"""Shorter configured values are masked at their own key only, not searched for in the rest of the file."""


@dataclass(frozen=True, slots=True)
class MaskedConfig:
    text: str
    """The copy's text."""
    masked: dict[str, str] = field(default_factory=dict)
    """Key path -> the variable(s) its secret was replaced by."""
    elsewhere: bool = False
    """A secret also stood outside any value (in a comment) and was replaced there too."""


def mask_inline_secrets(loaded: LoadedConfig, environ: Mapping[str, str] | None = None) -> MaskedConfig:
    """The text of ``loaded.config_path`` with every secret in it replaced by a ``${VAR}`` reference."""
    assert loaded.config_path is not None
    text = original = loaded.config_path.read_text(encoding="utf-8")
    env = home_environment(loaded.home, environ)
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    scalars = dict(_scalars(root, ())) if root is not None else {}
    values, needs = _variables(loaded, scalars, env)
    if not values:
        return MaskedConfig(text)
    searched = {value: name for value, name in values.items() if len(value) >= _MIN_LENGTH}
    secret_keys = set(loaded.secret_paths())
    spans: list[tuple[int, int, str]] = []
    masked: dict[str, str] = {}
    for path, node in scalars.items():
        new = _whole(node.value, values, searched) if path in secret_keys else _replace_all(node.value, searched)
        if new != node.value:
            start, end = node.start_mark.index, node.end_mark.index
            ending = "\n" if text[start:end].endswith("\n") else ""  # a block scalar's span ends with its line break
            spans.append((start, end, json.dumps(new) + ending))  # a JSON string is a YAML double-quoted scalar
            masked[path] = ", ".join(dict.fromkeys(name for value, name in values.items() if value in node.value))
    for start, end, replacement in sorted(spans, reverse=True):
        text = text[:start] + replacement + text[end:]
    rest = _replace_all(text, searched)
    _check_round_trip(loaded, original, rest, needs, env)
    return MaskedConfig(rest, masked, elsewhere=rest != text)


def _scalars(node: yaml.Node, path: tuple[str, ...]) -> Iterator[tuple[str, yaml.ScalarNode]]:
    """Every string scalar of the document with its dotted key path (list items by index)."""
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            yield from _scalars(value, (*path, str(key.value)))
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            yield from _scalars(item, (*path, str(index)))
    elif isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:str":
        yield ".".join(path), node


def _variables(
    loaded: LoadedConfig, scalars: Mapping[str, yaml.ScalarNode], env: Mapping[str, str]
) -> tuple[dict[str, str], dict[str, str]]:
    """Each secret in the file or the configuration -> the variable a masked copy refers to it by; and
    each of those variables -> the value it must hold for the copy to mean what the original means."""
    values: dict[str, str] = {}
    needs: dict[str, str] = {}
    for path in loaded.secret_paths():
        node = scalars.get(path)
        written = node.value if node is not None else ""
        value = get_path(loaded.settings, path)
        if not isinstance(value, str) or not value:
            continue
        if written and not _REFERENCE.fullmatch(written):
            # Inline: the text as written goes, under a variable that would give back what it means.
            name = values.get(written) or _free_name(path, conventional_variable(loaded.settings, path), value, needs, env)
            values.setdefault(written, name)
        else:  # from the environment: masked wherever else the file shows it
            name = loaded.variable_for(path) or conventional_variable(loaded.settings, path) or ""
        if name:
            values.setdefault(value, name)
            needs.setdefault(name, value)
    return values, needs


def _free_name(path: str, conventional: str | None, value: str, taken: Mapping[str, str], env: Mapping[str, str]) -> str:
    """The conventional variable when it would give ``value`` back, else one named after the key."""
    if conventional and conventional not in taken and env.get(conventional, value) in ("", value):
        return conventional
    return "SWITCHBOARD_" + re.sub(r"[^A-Z0-9]+", "_", path.upper())


def _whole(written: str, values: Mapping[str, str], searched: Mapping[str, str]) -> str:
    """A secret key's value: one reference for the whole of an inline value."""
    name = values.get(written)
    return f"${{{name}}}" if name else _replace_all(written, searched)


def _replace_all(text: str, values: Mapping[str, str]) -> str:
    for value in sorted(values, key=len, reverse=True):  # longest first: a secret holding another goes whole
        if value in text:
            text = text.replace(value, f"${{{values[value]}}}")
    return text


def _check_round_trip(
    loaded: LoadedConfig, original_text: str, text: str, variables: Mapping[str, str], env: Mapping[str, str]
) -> None:
    """With the variables set, the copy (``text``) must mean what the original means."""
    original = substitute(yaml.safe_load(original_text), env).data
    try:
        copy = substitute(yaml.safe_load(text), {**env, **variables}).data
    except yaml.YAMLError:
        copy = None
    if copy != original:
        raise ConfigError(
            [f"secrets are written inline in it ({', '.join(sorted(variables))}) and could not be masked in the "
             f"backup's copy: move them to {loaded.home / '.env'} and refer to them as ${{VAR}} in config.yaml"],
            source=loaded.config_path,
        )  # fmt: skip
