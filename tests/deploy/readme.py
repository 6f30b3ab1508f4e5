"""Just enough README parsing for the deploy tests: a section's shell blocks and the commands it shows."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from tests.deploy.dockerfile import REPO

README = REPO / "README.md"

COMMAND_ENDS = frozenset({";", "&&", "||", "|", "&", ">", ">>", "<", "(", ")"})
"""Tokens after which the words no longer belong to the command (the next command, or a redirection)."""


def section(title: str, path: Path = README) -> str:
    """The text under the ``## title`` heading, up to the next heading of the same level."""
    text = path.read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, flags=re.MULTILINE | re.DOTALL)
    assert match, f"README.md has no '## {title}' section"
    return match.group(1)


def shell_blocks(text: str) -> list[str]:
    """The bodies of the ```sh blocks in ``text``."""
    return re.findall(r"^```sh\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


def commands(text: str, program: str) -> list[list[str]]:
    """Every ``program ...`` command shown in ``text``: in shell blocks (a line each) and in inline code.

    Each is cut at the first redirection, pipe or command separator, so the words are the command's own.
    """
    lines = [line for block in shell_blocks(text) for line in block.splitlines()]
    prose = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    return commands_in(program, [*lines, *re.findall(r"`([^`\n]+)`", prose)])


def commands_in(program: str, lines: list[str]) -> list[list[str]]:
    """The ``program ...`` commands among ``lines``, cut as :func:`commands` cuts them.

    A line that leaves a quote open goes on over the next line, as in the shell.
    """
    found, pending = [], ""
    for line in lines:
        lexer = shlex.shlex(pending + line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        try:
            words = list(lexer)
        except ValueError:  # a quote goes on over the next line
            pending += line + "\n"
            continue
        pending = ""
        if words[:1] == ["sudo"]:
            words = words[1:]
        if words[:1] != [program]:
            continue
        cut = next((n for n, word in enumerate(words) if word in COMMAND_ENDS), len(words))
        found.append(words[:cut])
    return found
