"""The agent's identity: ``SOUL.md`` in the home directory.

On first run the home gets a ``SOUL.md`` holding :data:`DEFAULT_SOUL`; the
operator edits that file to change the agent's personality and tone. An empty
file means "no identity text at all". The file goes through the same injection
scan and size cap as every other file that enters the prompt.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

import structlog

from agent.injection import DEFAULT_MAX_CHARS, CheckedText, check_file_text, strip_bom

log = structlog.get_logger("agent.identity")

SOUL_FILE: Final = "SOUL.md"
SOUL_FILE_MODE: Final = 0o600

DEFAULT_SOUL: Final = """\
You are Switchboard, an AI assistant that people reach through chat apps.

Be useful first. Answer the question that was asked, lead with the answer, and \
add detail only when it helps. Match the user's language and register: a quick \
question gets a short reply, a hard problem gets a careful one.

Be honest. Say when you are unsure or don't know, never invent facts, sources \
or results, and correct yourself plainly when you get something wrong.

Be a good chat partner. Write in plain, friendly prose, keep messages easy to \
read on a phone, and ask one clear question when a request is ambiguous rather \
than guessing at something important.
"""


def soul_path(home: Path) -> Path:
    """Where the identity file lives for ``home``."""
    return home / SOUL_FILE


def seed_soul(home: Path) -> bool:
    """Write :data:`DEFAULT_SOUL` to ``SOUL.md`` unless a file is already there.

    Returns True when the file was created. The home directory itself is not
    created here (config owns the layout); a missing home is left alone.
    """
    if not home.is_dir():
        return False
    try:
        fd = os.open(soul_path(home), os.O_WRONLY | os.O_CREAT | os.O_EXCL, SOUL_FILE_MODE)
    except FileExistsError:
        return False
    except OSError as exc:
        log.warning("agent.identity.seed_failed", path=str(soul_path(home)), error=str(exc))
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(DEFAULT_SOUL)
    log.info("agent.identity.seeded", path=str(soul_path(home)))
    return True


def load_identity(home: Path | None, *, max_chars: int = DEFAULT_MAX_CHARS) -> CheckedText:
    """The identity text for the prompt, scanned and capped.

    - no home: :data:`DEFAULT_SOUL`;
    - no ``SOUL.md`` yet: seed it, then use :data:`DEFAULT_SOUL`;
    - an empty ``SOUL.md``: empty text (no identity section);
    - otherwise the file's content (or a BLOCKED marker if it fails the scan).
    """
    if home is None:
        return CheckedText(SOUL_FILE, DEFAULT_SOUL.strip(), original_chars=len(DEFAULT_SOUL))
    path = soul_path(home)
    if not path.exists():
        seed_soul(home)
        return CheckedText(SOUL_FILE, DEFAULT_SOUL.strip(), original_chars=len(DEFAULT_SOUL))
    try:
        text = strip_bom(path.read_text(encoding="utf-8", errors="replace")).strip()
    except OSError as exc:
        log.warning("agent.identity.unreadable", path=str(path), error=str(exc))
        return CheckedText(SOUL_FILE, DEFAULT_SOUL.strip(), original_chars=len(DEFAULT_SOUL))
    checked = check_file_text(text, SOUL_FILE, max_chars=max_chars)
    if checked.blocked:
        log.warning("agent.identity.blocked", path=str(path), findings=",".join(checked.findings))
    return checked
