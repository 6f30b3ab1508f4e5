"""Recognising chat commands: ``/help``, ``/new``, ``/stop``, ``/status``, ...

A command is a message whose first word is ``/name`` or ``/name@botname``.
Text that merely starts with a slash, like ``/usr/bin/ls``, is not a command,
and ``/help@another_bot`` is addressed to another bot, not to us.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_COMMAND = re.compile(r"^/([A-Za-z][A-Za-z0-9_]{0,31})(?:@([A-Za-z0-9_]+))?(?=\s|$)(.*)$", re.DOTALL)

ALIASES = {"reset": "new", "start": "help", "compact": "compress"}
KNOWN = ("help", "new", "stop", "status", "usage", "compress", "memory", "forget", "whoami")

HELP_TEXT = """\
Commands:
/new - start a fresh conversation (alias /reset)
/stop - stop the reply I'm working on
/status - this conversation: id, age, messages, tokens, cache use, model
/usage - tokens and cost for this conversation and today
/compress [focus] - summarise older messages now, optionally keeping a topic in focus
/memory - what I keep about you (in a DM), or about this shared thread
/forget - delete what I keep about you; /forget here: this shared thread's notes
/whoami - your ids and whether you can talk to me
/help - this list"""


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
