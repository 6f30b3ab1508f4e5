"""Recognising chat commands: ``/help``, ``/new``, ``/stop``, ``/status``, ...

A command is a message whose first word is ``/name`` or ``/name@botname``.
Text that merely starts with a slash, like ``/usr/bin/ls``, is not a command,
and ``/help@another_bot`` is addressed to another bot, not to us.

:data:`COMMANDS` is the one list of what the gateway answers: ``/help``'s text and
the command menus platforms show (:data:`COMMAND_MENU`) are made from it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from adapters.contract import CommandMenu, MenuCommand

_COMMAND = re.compile(r"^/([A-Za-z][A-Za-z0-9_]{0,31})(?:@([A-Za-z0-9_]+))?(?=\s|$)(.*)$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class CommandInfo:
    """One command the gateway answers: how ``/help`` explains it and how a platform's menu lists it."""

    name: str
    help: str
    """Its line in ``/help``, after ``/name [args] - ``."""
    menu: str
    """Its entry in a command menu in direct messages: short, capitalised."""
    args: str = ""
    """What may follow the name, as ``/help`` shows it."""
    group_menu: str | None = None
    """Its entry in group menus when it means something else there; None: the same as ``menu``."""


COMMANDS: tuple[CommandInfo, ...] = (
    CommandInfo("new", "start a fresh conversation (alias /reset)", "Start a fresh conversation"),
    CommandInfo("stop", "stop the reply I'm working on", "Stop the reply I'm working on"),
    CommandInfo("status", "this conversation: id, age, messages, tokens, cache use, model",
                "This conversation: age, messages, tokens, model"),
    CommandInfo("usage", "tokens and cost for this conversation and today",
                "Tokens and cost, this conversation and today"),
    CommandInfo("compress", "summarise older messages now, optionally keeping a topic in focus",
                "Summarise older messages now (add a topic to keep in focus)", args="[focus]"),
    CommandInfo("memory", "what I keep about you (in a DM), or about this shared thread", "What I keep about you",
                group_menu="Notes kept for this shared thread (yours: ask me in a DM)"),
    CommandInfo("forget", "delete what I keep about you; /forget here: this shared thread's notes",
                "Delete what I keep about you",
                group_menu="Delete what I keep about you (/forget here: this thread's notes)"),
    CommandInfo("whoami", "your ids and whether you can talk to me", "Your ids and whether you can talk to me"),
    CommandInfo("help", "this list", "What each command does"),
)  # fmt: skip
"""Every command, in the order ``/help`` and the menus list them."""

ALIASES = {"reset": "new", "start": "help", "compact": "compress"}
KNOWN = tuple(command.name for command in COMMANDS)

HELP_TEXT = "Commands:\n" + "\n".join(
    f"/{command.name}{' ' + command.args if command.args else ''} - {command.help}" for command in COMMANDS
)

COMMAND_MENU = CommandMenu(
    private=tuple(MenuCommand(command.name, command.menu) for command in COMMANDS),
    groups=tuple(MenuCommand(command.name, command.group_menu or command.menu) for command in COMMANDS),
)
"""What platforms with a command menu offer (handed to the adapters by ``gateway.adapter_loader``)."""


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    """The canonical name (aliases resolved), lower-case."""
    args: str


def parse_command(text: str, *, bot_username: str | None = None) -> Command | None:
    """The command in ``text``, or None when it is ordinary text or a command for another bot."""
    match = _COMMAND.match(text.strip())
    if match is None:
        return None
    name, addressee, rest = match.group(1).lower(), match.group(2), match.group(3)
    if _for_someone_else(addressee, bot_username):
        return None
    name = ALIASES.get(name, name)
    if name not in KNOWN:
        return None
    return Command(name=name, args=rest.strip())


def for_another_bot(text: str, *, bot_username: str | None) -> bool:
    """True for ``/anything@other_bot``: in a group, a message meant for another bot, which ours leaves alone."""
    if not bot_username or not text.lstrip().startswith("/"):
        return False
    match = _COMMAND.match(text.strip())
    return match is not None and _for_someone_else(match.group(2), bot_username)


def _for_someone_else(addressee: str | None, bot_username: str | None) -> bool:
    """``/cmd@addressee`` names a bot other than ours (unknowable without our own username)."""
    return bool(addressee and bot_username and addressee.lower() != bot_username.lower().lstrip("@"))
