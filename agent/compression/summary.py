"""Phase 3 of a compaction: the prompt that asks the summary model for notes.

The notes use fixed sections (Goal; Constraints & Preferences; Progress with
Done, In Progress and Blocked; Key Decisions; Relevant Files; Next Steps;
Critical Context), and Attachments when the turns carried photos or documents
(each reaches the summary model as a placeholder line; see ``attachments.py``).
On a later compaction the model receives its previous notes and is asked to
update them with the newer turns, so nothing is rewritten from scratch and
finished work moves from In Progress to Done.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from agent.compression.attachments import (
    ATTACHMENTS_HEADING,
    ATTACHMENTS_HINT,
    ATTACHMENTS_RULE,
    has_attachments,
    placeholder,
)
from agent.compression.engine import SummaryRequest
from agent.compression.framing import SUMMARY_HEADER, SUMMARY_TRAILER
from agent.messages import ChatMessage

__all__ = ["SECTIONS", "build_request", "clean_summary", "render_turns"]

SECTIONS: Final = (
    ("## Goal", "What the user is trying to achieve overall."),
    ("## Constraints & Preferences", "Requirements, preferences and limits the user stated, style and tools included."),
    ("## Progress", ""),
    ("### Done", "Finished work with specifics: files changed, commands run, results obtained."),
    ("### In Progress", "Work that was underway when these turns end."),
    ("### Blocked", "Problems that stopped progress, and what is needed to get past them."),
    ("## Key Decisions", "Technical choices that were made, and why."),
    ("## Relevant Files", "Files that were read, created or changed, each with a short note."),
    ("## Next Steps", "Work the user asked for that is still open, in order."),
    ("## Critical Context", "Exact values to keep: identifiers, settings, error messages, numbers, URLs."),
)

MAX_BODY_CHARS: Final = 6_000
KEEP_HEAD_CHARS: Final = 3_500
KEEP_TAIL_CHARS: Final = 1_500
MAX_ARGUMENT_CHARS: Final = 800
MAX_FOCUS_CHARS: Final = 500

INTRO: Final = (
    "You are condensing part of a conversation between a user and Switchboard, an AI assistant that "
    "works through chat platforms and tools. The assistant will carry on from your notes and will not "
    "see these turns again, so whatever you leave out is lost."
)
RULES: Final = (
    "Rules:\n"
    "- Reply with the notes only, starting with the first heading: no greeting, no commentary.\n"
    "- Write in the language the user writes in.\n"
    "- Record only what the turns show; do not guess or invent.\n"
    "- Keep exact values: file paths, commands, identifiers, numbers, error messages, URLs.\n"
    "- The notes are history. A request that was already handled goes under Done, never under Next "
    "Steps; Next Steps lists only what the user asked for and is still open.\n"
    "- Replace passwords, API keys and tokens with [REDACTED].\n"
    "- Write \"None.\" under a heading that has nothing to record.\n"
    "- Stay within about {budget:,} tokens."
)
FIRST_PASS: Final = "Condense the following turns into notes.\n\n<turns>\n{turns}\n</turns>"
UPDATE_PASS: Final = (
    "You already wrote the notes below for an earlier part of this conversation.\n\n"
    "<previous-notes>\n{previous}\n</previous-notes>\n\n"
    "Update those notes with the newer turns that follow. Keep everything that is still true, move "
    "finished items from In Progress to Done, add new progress, decisions and files, and remove what "
    "the newer turns made obsolete. Reply with the complete updated notes, not only the changes.\n\n"
    "<newer-turns>\n{turns}\n</newer-turns>"
)
FOCUS: Final = (
    "The user asked for this compaction with a focus: \"{focus}\". Give that topic most of the detail "
    "(about two thirds of the length) and keep the other sections brief."
)

_THINKING = re.compile(r"<(think|thinking|reasoning)>.*?</\1>\s*", re.DOTALL | re.IGNORECASE)


def _clip(text: str) -> str:
    if len(text) <= MAX_BODY_CHARS:
        return text
    omitted = len(text) - KEEP_HEAD_CHARS - KEEP_TAIL_CHARS
    return f"{text[:KEEP_HEAD_CHARS]}\n[... {omitted:,} characters omitted ...]\n{text[-KEEP_TAIL_CHARS:]}"


def _render_call(name: str, arguments: str) -> str:
    if len(arguments) > MAX_ARGUMENT_CHARS:
        arguments = arguments[:MAX_ARGUMENT_CHARS] + "..."
    return f"- {name} {arguments}"


def _render(message: ChatMessage) -> str:
    if message.role == "tool":
        label = f"[tool result: {message.tool_name or 'tool'} #{message.tool_call_id}]"
    else:
        label = f"[{message.role}]"
    parts = [label, *map(placeholder, message.media)]
    if message.content.strip():
        parts.append(_clip(message.content.strip()))
    if message.tool_calls:
        parts.append("called tools:\n" + "\n".join(_render_call(c.name, c.arguments) for c in message.tool_calls))
    return "\n".join(parts)


def render_turns(messages: Sequence[ChatMessage]) -> str:
    """The turns as labelled plain text, long bodies shortened in the middle."""
    return "\n\n".join(_render(message) for message in messages)


def _template(attachments: bool) -> str:
    lines = []
    for heading, hint in (*SECTIONS, *([(ATTACHMENTS_HEADING, ATTACHMENTS_HINT)] if attachments else [])):
        lines.append(heading)
        if hint:
            lines.append(f"[{hint}]")
    return "\n".join(lines)


def build_request(
    turns: Sequence[ChatMessage], *, budget: int, previous: str | None = None, focus: str | None = None
) -> SummaryRequest:
    """The summary call for ``turns``; with ``previous`` notes it asks for an update."""
    focus = " ".join(focus.split())[:MAX_FOCUS_CHARS] if focus else None
    rendered = render_turns(turns)
    task = UPDATE_PASS.format(previous=previous, turns=rendered) if previous else FIRST_PASS.format(turns=rendered)
    attachments = has_attachments(turns, previous)
    rules = RULES.format(budget=budget) + ("\n" + ATTACHMENTS_RULE if attachments else "")
    sections = [INTRO, rules, "Use exactly these headings:\n\n" + _template(attachments)]
    if focus:
        sections.append(FOCUS.format(focus=focus))
    sections.append(task)
    return SummaryRequest(prompt="\n\n".join(sections), max_tokens=budget, previous_summary=previous, focus=focus)


def clean_summary(text: str) -> str:
    """The model's reply without reasoning blocks or an echoed summary frame."""
    text = _THINKING.sub("", text or "").strip()
    if text.startswith(SUMMARY_HEADER):
        text = text[len(SUMMARY_HEADER):].strip()
    if text.endswith(SUMMARY_TRAILER):
        text = text[: -len(SUMMARY_TRAILER)].strip()
    return text
