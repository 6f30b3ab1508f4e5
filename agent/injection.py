"""Guarding text that enters the system prompt: an injection scan and a size cap.

Anything read from disk into the prompt (SOUL.md, project context files, skill
descriptions, memory entries) passes through here. A file that looks like a
prompt-injection attempt is not loaded at all: it is replaced by a one-line
``[BLOCKED: ...]`` marker naming the file and the pattern that matched. A file
that is merely long keeps its head (70 %) and tail (20 %) around a marker that
gives the counts.

Patterns match the text as :mod:`agent.folding` folds it (line breaks, spacing,
look-alike letters, invisible characters and case undone), so the usual disguises of
the same words are caught too. Still, the scan is a tripwire for common attacks, not a
boundary: a paraphrase or another language passes it. What limits the damage is that
memory is kept per person and that memory and project files are framed in the prompt
as data (:mod:`agent.data_framing`)::

    findings = scan_text(text)            # () when clean
    checked = check_file_text(text, "AGENTS.md")
    checked.text                          # what may enter the prompt
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Final, Literal

from agent.folding import INVISIBLE_CHARACTERS, JOINERS, views

Scope = Literal["context", "strict"]
"""``context`` for files in the prompt; ``strict`` adds checks for memory entries."""

DEFAULT_MAX_CHARS: Final = 20_000
HEAD_SHARE: Final = 0.7
TAIL_SHARE: Final = 0.2
BOM: Final = "\ufeff"

# Words inside one phrase are separated by spaces or light punctuation, never by a
# sentence end, so matches stay within a sentence. (Phrases read the prose view, where
# line breaks are spaces: a phrase split over two lines is still one phrase.)
_SEP: Final = r"[^\w\n.!?]+"


def _gap(words: int) -> str:
    """Between two keywords: a separator, with up to ``words`` filler words."""
    return rf"(?:{_SEP}\w+){{0,{words}}}?{_SEP}"


View = Literal["prose", "lines"]
"""Which folded form a pattern reads: ``prose`` (line breaks and spelled-out words undone) for
phrases, ``lines`` (line breaks kept) for commands, so a command never matches across two lines."""


@dataclass(frozen=True, slots=True)
class ThreatPattern:
    """One family of suspicious text, found by a regex on the folded text.

    ``spelled`` matches the same family in a word spelled out letter by letter with even gaps
    (``"i g n o r e a l l ..."``), where nothing marks the word boundaries: it reads the letters
    joined (``"ignoreall..."``).
    """

    id: str
    regex: re.Pattern[str]
    scope: Scope = "context"
    view: View = "prose"
    spelled: re.Pattern[str] | None = None


def _pattern(
    pattern_id: str, regex: str, scope: Scope = "context", *, view: View = "prose", spelled: str | None = None
) -> ThreatPattern:
    compiled_spelled = re.compile(spelled) if spelled is not None else None
    return ThreatPattern(pattern_id, re.compile(regex, re.IGNORECASE | re.DOTALL), scope, view, compiled_spelled)


THREAT_PATTERNS: Final[tuple[ThreatPattern, ...]] = (
    _pattern(
        "instruction_override",
        rf"\b(?:ignore|disregard|forget|override)\b{_gap(4)}"
        rf"(?:previous|prior|above|earlier|preceding|all|any|your|these|those|system)\b{_gap(3)}"
        r"(?:instructions?|rules|guidelines|directives|prompts?|guardrails)\b",
        spelled=r"(?:ignore|disregard|forget|override)\w{0,40}?(?:instructions?|rules|guidelines|directives|prompts?)",
    ),
    _pattern(
        "system_prompt_override",
        r"\b(?:system\s+prompt\s+override|new\s+system\s+prompt|"
        r"(?:override|replace|overwrite)\s+(?:the\s+|your\s+)?system\s+prompt)\b",
        spelled=r"systempromptoverride|newsystemprompt|(?:override|replace|overwrite)(?:the|your)?systemprompt",
    ),
    _pattern(
        "role_hijack",
        r"\b(?:you\s+are\s+now\s+(?:a|an|the|in|my)\b|from\s+now\s+on,?\s+you\s+are\b|"
        r"pretend\s+(?:to\s+be|you\s+are)\b|you\s+have\s+been\s+(?:updated|upgraded|reprogrammed)\b)",
        spelled=r"youarenow(?:an?|the|in|my)|fromnowonyouare|pretend(?:tobe|youare)|youhavebeen(?:updated|upgraded|reprogrammed)",
    ),
    _pattern(
        "bypass_restrictions",
        r"\b(?:act|behave|respond|answer)\s+as\s+(?:if|though)\s+you\s+(?:have|had)\s+no\s+"
        r"(?:restrictions|rules|limits|limitations|filters|guidelines)\b|"
        r"\b(?:disable|remove|bypass|turn\s+off)\s+(?:all\s+|your\s+|the\s+)?(?:safety\s+|content\s+)?"
        r"(?:filters|restrictions|guardrails|safeguards)\b",
    ),
    _pattern(
        "deception",
        rf"\b(?:do\s+not|don'?t|never|without)\b{_gap(3)}"
        r"(?:tell|telling|inform|informing|notify|notifying|alert|alerting)\b"
        r"(?:\s+\w+){0,2}?\s+(?:the\s+)?(?:user|human|operator|owner)s?\b",
    ),
    _pattern(
        "prompt_leak",
        rf"\b(?:reveal|print|output|repeat|dump|leak|disclose)\b{_gap(4)}"
        r"(?:your|the)\s+(?:system\s+prompt|initial\s+instructions|hidden\s+instructions)\b",
        spelled=r"(?:reveal|print|output|repeat|dump|leak|disclose)\w{0,40}?(?:systemprompt|initialinstructions)",
    ),
    _pattern(
        "hidden_div",
        r"<(?:div|span|p|section)\b[^>]{0,300}?\bstyle\s*=\s*[\"'][^\"'>]{0,300}?"
        r"(?:display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0)",
        view="lines",
    ),
    _pattern(
        "credential_exfiltration",
        r"\b(?:curl|wget|nc|ncat|invoke-webrequest|iwr)\b[^\n]{0,200}?"
        r"\$\{?\w*(?:key|token|secret|password|passwd|credential|api)\w*",
        view="lines",
    ),
    _pattern(
        "secret_file_read",
        r"\b(?:cat|bat|less|tail|base64|xxd|strings|grep|get-content)\b(?:[^\S\n]+[^\s|;&]+){0,2}?"
        r"[^\S\n]+[^\s|;&]*?"
        r"(?:(?<![\w.])\.env(?:\.(?!example\b|sample\b|template\b|dist\b)\w+)?(?![\w.])|"
        r"\bcredentials\b|\.netrc\b|\.pgpass\b|\.npmrc\b|\.pypirc\b|\bid_(?:rsa|ed25519|ecdsa)\b|"
        r"\.aws/|\.ssh/)",
        view="lines",
    ),
    _pattern(
        "ssh_backdoor",
        r"\bauthorized_keys\b",
        scope="strict",
        view="lines",
    ),
    _pattern(
        "send_to_url",
        rf"\b(?:send|post|upload|forward|exfiltrate|transmit)\b{_gap(6)}(?:to|at)\s+https?://",
        scope="strict",
    ),
)


HIDDEN_COMMENT_ID: Final = "hidden_html_comment"
_COMMENT_KEYWORDS: Final = re.compile(
    r"(?<![\w-])(?:ignore|disregard|override|secret|hidden|instructions?|assistant|"
    r"system\s+prompt|you\s+must|you\s+are)\b",
    re.IGNORECASE,
)


def html_comments(text: str) -> list[str]:
    """The bodies of ``<!-- ... -->`` comments; an unclosed one runs to the end."""
    bodies: list[str] = []
    start = text.find("<!--")
    while start != -1:
        end = text.find("-->", start + 4)
        bodies.append(text[start + 4 : end if end != -1 else len(text)])
        if end == -1:
            break
        start = text.find("<!--", end + 3)
    return bodies


def _has_suspicious_comment(text: str) -> bool:
    # Comments are invisible once Markdown is rendered, so instructions there target the model.
    return any(_COMMENT_KEYWORDS.search(body) for body in html_comments(text))


def strip_bom(text: str) -> str:
    """``text`` without one leading byte-order mark (harmless, so not a finding)."""
    return text[1:] if text.startswith(BOM) else text


def invisible_characters(text: str) -> tuple[str, ...]:
    """Finding ids (``invisible_unicode_U+XXXX``) for hidden characters, first-seen order.

    Zero-width joiners and non-joiners count only next to ASCII: between Persian or Indic
    letters, or inside an emoji sequence, they are how those are written.
    """
    seen: dict[str, None] = {}
    text = strip_bom(text)
    for match in _INVISIBLE.finditer(text):
        code, at = ord(match.group(0)), match.start()
        if code in JOINERS and not _next_to_ascii(text, at):
            continue
        seen.setdefault(f"invisible_unicode_U+{code:04X}", None)
    return tuple(seen)


_INVISIBLE: Final = re.compile("[" + "".join(re.escape(chr(code)) for code in sorted(INVISIBLE_CHARACTERS)) + "]")


def _next_to_ascii(text: str, at: int) -> bool:
    before = text[at - 1] if at > 0 else ""
    after = text[at + 1] if at + 1 < len(text) else ""
    return (before.isascii() and not before.isspace()) or (after.isascii() and not after.isspace())


@functools.lru_cache(maxsize=256)
def scan_text(text: str, scope: Scope = "context") -> tuple[str, ...]:
    """The ids of every threat family found in ``text``; ``()`` means clean.

    ``strict`` runs the ``context`` families plus those meant for memory writes. Patterns
    read the folded text (:mod:`agent.folding`), so line-split, spaced-out, look-alike,
    zero-width-split and mixed-case versions of a phrase match like the plain one.
    Remembered for recent texts: every new session's prompt scans the same files, shared
    notes and memory entries again, and scanning is the costly part of starting a session.
    """
    text = strip_bom(text)
    findings = list(invisible_characters(text))
    folded = views(text)
    for pattern in THREAT_PATTERNS:
        if pattern.scope == "strict" and scope != "strict":
            continue
        if pattern.regex.search(folded.prose if pattern.view == "prose" else folded.lines) or (
            pattern.spelled is not None and any(pattern.spelled.search(run) for run in folded.spelled)
        ):
            findings.append(pattern.id)
    if _has_suspicious_comment(folded.lines):
        findings.append(HIDDEN_COMMENT_ID)
    return tuple(findings)


def blocked_marker(label: str, findings: tuple[str, ...]) -> str:
    """The one line that stands in for a file that failed the scan."""
    reasons = ", ".join(findings)
    return f"[BLOCKED: {label} was not loaded because it looks like a prompt injection ({reasons}).]"


def truncate_text(text: str, label: str, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """``text`` cut to its first 70 % and last 20 % of ``max_chars`` when longer than that.

    The marker between the two parts gives the counts, so the model knows text is missing.
    """
    if len(text) <= max_chars:
        return text
    head = int(max_chars * HEAD_SHARE)
    tail = int(max_chars * TAIL_SHARE)
    marker = (
        f"\n\n[...{label} shortened: showing the first {head:,} and the last {tail:,} "
        f"of {len(text):,} characters; the {len(text) - head - tail:,} in between are left out.]\n\n"
    )
    return text[:head] + marker + text[len(text) - tail :]


@dataclass(frozen=True, slots=True)
class CheckedText:
    """A file's text after the scan and the size cap: what may enter the prompt."""

    label: str
    text: str
    findings: tuple[str, ...] = ()
    original_chars: int = 0
    truncated: bool = False

    @property
    def blocked(self) -> bool:
        return bool(self.findings)

    def notice(self) -> str | None:
        """A short warning for the operator when the file was blocked or shortened."""
        if self.blocked:
            return f"{self.label} was blocked ({', '.join(self.findings)})."
        if self.truncated:
            return f"{self.label} is {self.original_chars:,} characters; only part of it was loaded."
        return None


def check_file_text(
    text: str,
    label: str,
    *,
    max_chars: int = DEFAULT_MAX_CHARS,
    scope: Scope = "context",
) -> CheckedText:
    """Scan ``text`` (and its ``label``, which also enters the prompt) and cap its size.

    A finding replaces the whole text by :func:`blocked_marker`; otherwise the text
    is truncated by :func:`truncate_text`. A leading BOM is dropped either way.
    """
    body = strip_bom(text)
    findings = scan_text(f"{label}\n{body}", scope)
    if findings:
        return CheckedText(label, blocked_marker(label, findings), findings, len(body))
    kept = truncate_text(body, label, max_chars)
    return CheckedText(label, kept, (), len(body), truncated=kept != body)
