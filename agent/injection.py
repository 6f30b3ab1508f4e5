"""Guarding text that enters the system prompt: an injection scan and a size cap.

Anything read from disk into the prompt (SOUL.md, project context files, skill
descriptions, memory entries) passes through here. A file that looks like a
prompt-injection attempt is not loaded at all: it is replaced by a one-line
``[BLOCKED: ...]`` marker naming the file and the pattern that matched. A file
that is merely long keeps its head (70 %) and tail (20 %) around a marker that
gives the counts.

The scan is a tripwire for common attacks, not a proof of safety::

    findings = scan_text(text)            # () when clean
    checked = check_file_text(text, "AGENTS.md")
    checked.text                          # what may enter the prompt
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass
from typing import Final, Literal

Scope = Literal["context", "strict"]
"""``context`` for files in the prompt; ``strict`` adds checks for memory entries."""

DEFAULT_MAX_CHARS: Final = 20_000
HEAD_SHARE: Final = 0.7
TAIL_SHARE: Final = 0.2
BOM: Final = "\ufeff"

# Words inside one phrase are separated by spaces or light punctuation, never by
# a sentence end or a line break, so matches stay within a sentence.
_SEP: Final = r"[^\w\n.!?]+"


def _gap(words: int) -> str:
    """Between two keywords: a separator, with up to ``words`` filler words."""
    return rf"(?:{_SEP}\w+){{0,{words}}}?{_SEP}"


INVISIBLE_CHARACTERS: Final[frozenset[int]] = frozenset(
    (
        *(0x200B, 0x200C, 0x200D),  # zero-width space, non-joiner, joiner
        *range(0x2060, 0x2065),  # word joiner and invisible operators
        0xFEFF,  # zero-width no-break space (a BOM anywhere but the start)
        0x180E,  # Mongolian vowel separator
        *range(0x202A, 0x202F),  # bidi embeddings and overrides
        *range(0x2066, 0x206A),  # bidi isolates
        0xE0001,
        *range(0xE0020, 0xE0080),  # tag characters (invisible ASCII smuggling)
    )
)


@dataclass(frozen=True, slots=True)
class ThreatPattern:
    """One family of suspicious text, found by a case-insensitive regex."""

    id: str
    regex: re.Pattern[str]
    scope: Scope = "context"


def _pattern(pattern_id: str, regex: str, scope: Scope = "context") -> ThreatPattern:
    return ThreatPattern(pattern_id, re.compile(regex, re.IGNORECASE | re.DOTALL), scope)


THREAT_PATTERNS: Final[tuple[ThreatPattern, ...]] = (
    _pattern(
        "instruction_override",
        rf"\b(?:ignore|disregard|forget|override)\b{_gap(4)}"
        rf"(?:previous|prior|above|earlier|preceding|all|any|your|these|those|system)\b{_gap(3)}"
        r"(?:instructions?|rules|guidelines|directives|prompts?|guardrails)\b",
    ),
    _pattern(
        "system_prompt_override",
        r"\b(?:system\s+prompt\s+override|new\s+system\s+prompt|"
        r"(?:override|replace|overwrite)\s+(?:the\s+|your\s+)?system\s+prompt)\b",
    ),
    _pattern(
        "role_hijack",
        r"\b(?:you\s+are\s+now\s+(?:a|an|the|in|my)\b|from\s+now\s+on,?\s+you\s+are\b|"
        r"pretend\s+(?:to\s+be|you\s+are)\b|you\s+have\s+been\s+(?:updated|upgraded|reprogrammed)\b)",
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
    ),
    _pattern(
        "hidden_div",
        r"<(?:div|span|p|section)\b[^>]{0,300}?\bstyle\s*=\s*[\"'][^\"'>]{0,300}?"
        r"(?:display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0)",
    ),
    _pattern(
        "credential_exfiltration",
        r"\b(?:curl|wget|nc|ncat|invoke-webrequest|iwr)\b[^\n]{0,200}?"
        r"\$\{?\w*(?:key|token|secret|password|passwd|credential|api)\w*",
    ),
    _pattern(
        "secret_file_read",
        r"\b(?:cat|bat|less|tail|base64|xxd|strings|grep|get-content)\b(?:[^\S\n]+[^\s|;&]+){0,2}?"
        r"[^\S\n]+[^\s|;&]*?"
        r"(?:(?<![\w.])\.env(?:\.(?!example\b|sample\b|template\b|dist\b)\w+)?(?![\w.])|"
        r"\bcredentials\b|\.netrc\b|\.pgpass\b|\.npmrc\b|\.pypirc\b|\bid_(?:rsa|ed25519|ecdsa)\b|"
        r"\.aws/|\.ssh/)",
    ),
    _pattern(
        "ssh_backdoor",
        r"\bauthorized_keys\b",
        scope="strict",
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
    """Finding ids (``invisible_unicode_U+XXXX``) for hidden characters, first-seen order."""
    seen: dict[str, None] = {}
    for char in strip_bom(text):
        if ord(char) in INVISIBLE_CHARACTERS:
            seen.setdefault(f"invisible_unicode_U+{ord(char):04X}", None)
    return tuple(seen)


def scan_text(text: str, scope: Scope = "context") -> tuple[str, ...]:
    """The ids of every threat family found in ``text``; ``()`` means clean.

    ``strict`` runs the ``context`` families plus those meant for memory writes.
    Regexes run on the NFKC-normalised text, so look-alike letters don't hide a match.
    """
    findings = list(invisible_characters(text))
    normalized = unicodedata.normalize("NFKC", strip_bom(text))
    for pattern in THREAT_PATTERNS:
        if pattern.scope == "strict" and scope != "strict":
            continue
        if pattern.regex.search(normalized):
            findings.append(pattern.id)
    if _has_suspicious_comment(normalized):
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


@functools.lru_cache(maxsize=128)
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
    Remembered for recent texts: every new session's prompt checks the same files again
    (the scan was most of the cost of starting a session in the gateway benchmark).
    """
    body = strip_bom(text)
    findings = scan_text(f"{label}\n{body}", scope)
    if findings:
        return CheckedText(label, blocked_marker(label, findings), findings, len(body))
    kept = truncate_text(body, label, max_chars)
    return CheckedText(label, kept, (), len(body), truncated=kept != body)
