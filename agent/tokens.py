"""Cheap token estimates that hold across scripts, kept incrementally per session.

Counting characters and dividing by four is right for English and badly wrong
elsewhere: a Chinese character or an emoji is roughly one or two tokens, not a
quarter of one. So text is classified character by character (ASCII letters,
digits, punctuation, whitespace, CJK, emoji, other non-ASCII) and each class
has its own tokens-per-character weight, fitted against a real tokenizer; runs
of letters (words) and of punctuation add a weight each, since a word is about
one token whatever its length. Code and JSON come out right without being
detected: they are richer in punctuation runs, digits and line breaks. Blobs
(base64, hex digests, JWTs) are the exception: a tokenizer cuts them into
short pieces, so long runs of their alphabets are found and counted by their
length and how often they change between lower case, upper case and digits.

Usage::

    estimate_text("Hello, world")           # tokens in one string
    estimate_message(ChatMessage.user("你好")) # content + tool calls + media + framing
    estimate_message(photo_message, style="openai")  # a picture counted by OpenAI's tiles

    tally = TokenTally(fixed=estimate_request("You are helpful.", (), tools))
    tally.add(message)                      # O(len(message))
    tally.total                             # O(1): the whole prompt, calibrated
    tally.calibrate(usage.prompt_tokens)    # after a call: learn from the API's count

The estimate is an approximation for budgeting (when to compact), never a bill.
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from agent.media import MediaPart, ProviderStyle, part_tokens, standin
from agent.messages import ChatMessage
from agent.providers.media_blocks import NO_VISION

__all__ = [
    "CALIBRATION_BOUNDS",
    "MESSAGE_OVERHEAD",
    "MIN_CALIBRATION_TOKENS",
    "TokenTally",
    "estimate_message",
    "estimate_request",
    "estimate_text",
    "estimate_tools",
    "media_tokens",
]

# Tokens per character of each class, plus tokens per run of letters (a word
# is about one token whatever its length) and per run of ASCII punctuation,
# and for blobs (see below) per character and per change of class.
# Fitted by bench/calibrate_tokens.py against tiktoken o200k_base (GPT-4o,
# GPT-4.1, GPT-5): non-negative least squares on the relative error of 150
# generated samples per category (English prose, Python source, JSON tool
# output, Chinese, Japanese, emoji-heavy chat, other scripts, log lines,
# base64 and hex digests), seed 1; bench/agent.py checks them on seed 2, with
# blobs of kinds the fit never saw (JWTs, PEM blocks, data URLs, UUIDs). Claude's tokenizer is not
# available offline: the per-session calibration against reported usage
# absorbs the difference.
LOWER_WEIGHT: Final = 0.071
UPPER_WEIGHT: Final = 0.218
DIGIT_WEIGHT: Final = 0.431
PUNCT_WEIGHT: Final = 0.014
SPACE_WEIGHT: Final = 0.024
NEWLINE_WEIGHT: Final = 0.817
WORD_WEIGHT: Final = 0.616
PUNCT_RUN_WEIGHT: Final = 1.085
CJK_WEIGHT: Final = 0.724
EMOJI_WEIGHT: Final = 1.644
EMOJI_JOINER_WEIGHT: Final = 1.121
OTHER_WEIGHT: Final = 0.236
BLOB_CHAR_WEIGHT: Final = 0.325
BLOB_SWITCH_WEIGHT: Final = 0.555

MESSAGE_OVERHEAD: Final = 4
"""Role marker and separators that frame every message in the rendered prompt."""
TOOL_CALL_OVERHEAD: Final = 6
"""Framing of one tool call (type, id and argument keys) besides its name and arguments."""
TOOL_SCHEMA_OVERHEAD: Final = 8
"""Framing of one tool definition besides its name, description and parameter schema."""
MEDIA_PART_OVERHEAD: Final = 3
"""Framing of one picture or document block besides what the picture or text itself costs."""

CALIBRATION_BOUNDS: Final = (0.5, 2.0)
"""The correction factor never leaves this range, however odd the reported usage."""
MIN_CALIBRATION_TOKENS: Final = 500
"""Below this, fixed costs the API adds (e.g. a tool-use preamble) swamp the ratio."""
CALIBRATION_SMOOTHING: Final = 0.3
"""Weight of each new observation once a few are known (the first ones are averaged)."""

# Text is classified on its UTF-8 bytes, where CPython does the work in C:
# one translation maps every byte to a class letter, then ``bytes.count``
# tallies each class. ASCII bytes get their own classes; of a multi-byte
# character only the lead byte is classified (continuation bytes become "x"),
# and the lead byte already tells the code-point range:
#   C2-DF  U+0080-07FF   Latin extensions, Greek, Cyrillic, Hebrew, Arabic   -> "o"
#   E0-E2  U+0800-2FFF   Indic, Thai, general punctuation, symbols          -> "b"
#   E3-ED  U+3000-DFFF   CJK punctuation, kana, Han, Hangul                  -> "c"
#   EE-EF  U+E000-FFFF   private use, compatibility, full-width, selectors   -> "b"
#   F0-F4  U+10000-      emoji (pictographs, flags, skin tones)              -> "e"
# Byte sequences then move the exceptions within "b": full-width forms are CJK,
# dingbats and other BMP pictographs are emoji, ZWJ and variation selectors join emoji.
_CLASSES: Final = bytes(
    ord(
        "l" if chr(b).islower() else
        "u" if chr(b).isupper() else
        "d" if chr(b).isdigit() else
        "s" if chr(b) in " \t" else
        "n" if chr(b) in "\n\r\v\f" else
        "p"
    ) if b < 0x80 else
    ord("x") if b < 0xC2 else
    ord("o") if b < 0xE0 else
    ord("b") if b < 0xE3 else
    ord("c") if b < 0xEE else
    ord("b") if b < 0xF0 else
    ord("e") if b < 0xF5 else
    ord("x")
    for b in range(256)
)  # fmt: skip
# The same bytes as "1" (in the class) or "0": a run starts at each "01".
# Every byte of a non-ASCII character counts as a letter here: "café" and "мир" are words.
_LETTER_FLAGS: Final = bytes(ord("1" if chr(b).isalpha() or b >= 0x80 else "0") for b in range(256))
_PUNCT_FLAGS: Final = bytes(ord("1" if _CLASSES[b] == ord("p") else "0") for b in range(256))
_FULL_WIDTH: Final = (b"\xef\xbc", b"\xef\xbd")  # U+FF00-FF7F: ，！？ and full-width Latin
_VARIATION_SELECTORS: Final = (b"\xef\xb8\x8e", b"\xef\xb8\x8f")  # VS15, VS16
_ZWJ: Final = b"\xe2\x80\x8d"
_SYMBOL_EMOJI: Final = tuple(
    bytes((0xE2, second))
    for second in (*range(0x8C, 0x90), *range(0x98, 0x9F), *range(0xAC, 0xB0))
)  # U+2300-23FF, U+2600-27BF, U+2B00-2BFF: ⌚ ⏰ ☕ ✅ ❤ ✨ ⭐ and kin

# Blobs: a pasted base64 file, a JWT, hex digests. A tokenizer cuts them into pieces of two or three
# characters, and at every change between lower case, upper case, digits and punctuation, so the
# weights fitted on words (a word is about one token) come out at a third to three quarters of
# their real count. A maximal run of at least BLOB_MIN_RUN characters of the base64 and hex
# alphabets that is hex, or changes class often enough, is counted by its length and its class
# switches instead. A cheap probe (one translate, one search) skips all this for text without
# such a run, which is nearly all text.
BLOB_MIN_RUN: Final = 32
BLOB_SWITCH_SHARE: Final = 0.35
_BLOB_ALPHABET: Final = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-"
_BLOB_FLAGS: Final = bytes(ord("1" if b in _BLOB_ALPHABET else "0") for b in range(256))
_BLOB_PROBE: Final = b"1" * BLOB_MIN_RUN
_HEX_BYTES: Final = b"0123456789abcdefABCDEF-"

_WEIGHTS: Final = (
    LOWER_WEIGHT, UPPER_WEIGHT, DIGIT_WEIGHT, PUNCT_WEIGHT, SPACE_WEIGHT, NEWLINE_WEIGHT,
    WORD_WEIGHT, PUNCT_RUN_WEIGHT, CJK_WEIGHT, EMOJI_WEIGHT, EMOJI_JOINER_WEIGHT, OTHER_WEIGHT,
    BLOB_CHAR_WEIGHT, BLOB_SWITCH_WEIGHT,
)  # fmt: skip
"""In the order ``_class_counts`` returns its counts."""


def _runs(raw: bytes, flags: bytes) -> int:
    marked = raw.translate(flags)
    return marked.count(b"01") + marked.startswith(b"1")


def _class_counts(text: str) -> tuple[int, ...]:
    """Counts in ``_WEIGHTS`` order: characters per class, letter and punctuation runs, non-ASCII classes,
    then the characters and class switches of blobs (which are left out of everything before)."""
    ascii_only = text.isascii()
    raw = text.encode("ascii") if ascii_only else text.encode("utf-8", "surrogatepass")
    blob_chars = blob_switches = 0
    if len(raw) >= BLOB_MIN_RUN:
        flags = raw.translate(_BLOB_FLAGS)
        if _BLOB_PROBE in flags:
            raw, blob_chars, blob_switches = _cut_blobs(raw, flags)
    counts = _ascii_counts(raw) if ascii_only else _utf8_counts(raw)
    return (*counts, blob_chars, blob_switches)


def _cut_blobs(raw: bytes, flags: bytes) -> tuple[bytes, int, int]:
    """``raw`` without its blobs, and the blobs' characters and class switches.

    ``flags`` marks the bytes of the blob alphabets with "1": every run of at least
    ``BLOB_MIN_RUN`` of them is looked at, and cut out if it is a blob.
    """
    rest: list[bytes] = []
    chars = switches = cut = end = 0
    classes = raw.translate(_CLASSES)
    while (start := flags.find(_BLOB_PROBE, end)) >= 0:
        end = flags.find(b"0", start)
        end = len(flags) if end < 0 else end
        kinds = classes[start:end]
        if b"d" not in kinds or (b"l" not in kinds and b"u" not in kinds):
            continue  # a long word, path, identifier or number: the usual weights fit
        # Changes of class between neighbours: XOR the class letters with themselves shifted by
        # one; a zero byte is a pair of the same class.
        pairs = (int.from_bytes(kinds[:-1], "big") ^ int.from_bytes(kinds[1:], "big")).to_bytes(len(kinds) - 1, "big")
        changes = len(pairs) - pairs.count(0)
        if raw[start:end].translate(None, _HEX_BYTES) and changes < BLOB_SWITCH_SHARE * len(kinds):
            continue  # not hex, and too regular for base64: CamelCase, a path with a number in it
        rest.append(raw[cut:start])
        cut = end
        chars += end - start
        switches += changes
    if not rest:
        return raw, 0, 0
    rest.append(raw[cut:])
    return b"".join(rest), chars, switches


def _ascii_counts(raw: bytes) -> tuple[int, ...]:
    classes = raw.translate(_CLASSES)
    lower, upper, digit = classes.count(b"l"), classes.count(b"u"), classes.count(b"d")
    space, newline = classes.count(b"s"), classes.count(b"n")
    punct = len(raw) - lower - upper - digit - space - newline
    words, punct_runs = _runs(raw, _LETTER_FLAGS), _runs(raw, _PUNCT_FLAGS)
    return (lower, upper, digit, punct, space, newline, words, punct_runs, 0, 0, 0, 0)


def _utf8_counts(raw: bytes) -> tuple[int, ...]:
    classes = raw.translate(_CLASSES)
    lower, upper, digit = classes.count(b"l"), classes.count(b"u"), classes.count(b"d")
    punct, space, newline = classes.count(b"p"), classes.count(b"s"), classes.count(b"n")
    words, punct_runs = _runs(raw, _LETTER_FLAGS), _runs(raw, _PUNCT_FLAGS)
    other, cjk, emoji = classes.count(b"o"), classes.count(b"c"), classes.count(b"e")
    joiners = 0
    if b"b" in classes:  # U+0800-2FFF or U+E000-FFFF: sort out the exceptions
        misc = classes.count(b"b")
        full_width = symbols = 0
        if b"\xef" in raw:
            full_width = sum(map(raw.count, _FULL_WIDTH))
            joiners += sum(map(raw.count, _VARIATION_SELECTORS)) if b"\xef\xb8" in raw else 0
        if b"\xe2" in raw:
            joiners += raw.count(_ZWJ)
            symbols = sum(map(raw.count, _SYMBOL_EMOJI))
        cjk += full_width
        emoji += symbols
        other += misc - full_width - joiners - symbols
    return (lower, upper, digit, punct, space, newline, words, punct_runs, cjk, emoji, joiners, other)


def estimate_text(text: str) -> int:
    """Estimated tokens in ``text``: 0 for empty text, otherwise at least 1.

    Linear in ``len(text)``: a few C-level passes over its UTF-8 bytes
    (translate, count), a few more when it has non-ASCII characters.
    """
    if not text:
        return 0
    return max(1, math.ceil(sum(map(operator.mul, _class_counts(text), _WEIGHTS))))


def estimate_message(message: ChatMessage, *, style: ProviderStyle = "anthropic", vision: bool = True) -> int:
    """Estimated tokens ``message`` adds to a prompt: content, tool calls, media parts and framing.

    A picture or document counts as the provider counts it (:func:`agent.media.part_tokens` in
    ``style``: a picture by its pixels, a PDF by its pages and text), never by its bytes; for a
    model without ``vision`` a picture is its one-line stand-in and a PDF its text, as they are
    sent. ``reasoning`` and ``meta`` are not counted: providers do not send them back. The
    estimate in the default style is remembered on the message (it is immutable, and storage
    keeps that figure too), so a long history is estimated once; another style adjusts it by
    the parts alone.
    """
    tokens = message.token_estimate
    if tokens is None:
        tokens = MESSAGE_OVERHEAD + estimate_text(message.content)
        for call in message.tool_calls:
            tokens += TOOL_CALL_OVERHEAD + estimate_text(call.id) + estimate_text(call.name) + estimate_text(call.arguments)
        if message.tool_call_id:
            tokens += estimate_text(message.tool_call_id)
        tokens += sum(media_tokens(part) for part in message.media)
        object.__setattr__(message, "token_estimate", tokens)
    if message.media and (style, vision) != ("anthropic", True):
        tokens += sum(media_tokens(part, style, vision) - media_tokens(part) for part in message.media)
    return tokens


def media_tokens(part: MediaPart, style: ProviderStyle = "anthropic", vision: bool = True) -> int:
    """What one media part costs (a user's file, or a picture a tool returned), as it is sent to a model of
    ``style`` and ``vision``."""
    if part.kind == "image" and not vision:
        return estimate_text(standin(part, NO_VISION))
    return part_tokens(part, style if vision else "openai") + MEDIA_PART_OVERHEAD


def estimate_tools(tools: Sequence[Mapping[str, Any]]) -> int:
    """Estimated tokens of tool definitions (any JSON-ready schema shape).

    Compute once per tool set and keep it: it serialises every schema.
    """
    schemas = (json.dumps(tool, separators=(",", ":"), ensure_ascii=False) for tool in tools)
    return sum(TOOL_SCHEMA_OVERHEAD + estimate_text(schema) for schema in schemas)


def estimate_request(
    system_prompt: str,
    messages: Iterable[ChatMessage],
    tools: Sequence[Mapping[str, Any]] = (),
) -> int:
    """Estimated prompt tokens of a whole request: system prompt, messages and tools (uncalibrated)."""
    tokens = (estimate_text(system_prompt) + MESSAGE_OVERHEAD) if system_prompt else 0
    return tokens + sum(map(estimate_message, messages)) + estimate_tools(tools)


class TokenTally:
    """A session's running prompt estimate: O(size) per message added, O(1) to read.

    ``fixed`` holds what every request carries besides the conversation
    (system prompt, tool schemas). ``raw`` is the plain estimate; ``total``
    applies the correction factor learned from the API's own counts::

        tally = TokenTally(history, fixed=estimate_request(system, (), tools))
        ...call the model with the same system prompt, tools and history...
        tally.calibrate(usage.prompt_tokens)  # before adding the reply
        tally.add(reply)
    """

    __slots__ = ("_count", "_factor", "_fixed", "_messages", "_observations")

    def __init__(self, messages: Iterable[ChatMessage] = (), *, fixed: int = 0) -> None:
        self._fixed = fixed
        self._messages = 0
        self._count = 0
        self._factor = 1.0
        self._observations = 0
        self.extend(messages)

    @property
    def raw(self) -> int:
        """Uncalibrated estimate: fixed part plus every message."""
        return self._fixed + self._messages

    @property
    def total(self) -> int:
        """Calibrated estimate of the whole prompt, in tokens."""
        return round(self.raw * self._factor)

    @property
    def factor(self) -> float:
        """The correction factor applied to ``raw`` (1.0 until calibrated)."""
        return self._factor

    @property
    def fixed(self) -> int:
        """Tokens every request carries besides the conversation (system prompt, tools)."""
        return self._fixed

    @property
    def message_count(self) -> int:
        """How many messages are counted."""
        return self._count

    def set_fixed(self, tokens: int) -> None:
        """Replace the fixed part, e.g. after the system prompt was rebuilt."""
        self._fixed = tokens

    def add(self, message: ChatMessage) -> int:
        """Count one more message; returns its own estimate."""
        tokens = estimate_message(message)
        self._messages += tokens
        self._count += 1
        return tokens

    def extend(self, messages: Iterable[ChatMessage]) -> None:
        for message in messages:
            self.add(message)

    def reset(self, messages: Iterable[ChatMessage] = ()) -> None:
        """Recount from scratch (after compaction); the calibration is kept."""
        self._messages = 0
        self._count = 0
        self.extend(messages)

    def calibrate(self, reported_prompt_tokens: int, estimated: int | None = None) -> float:
        """Learn from the API's count of a prompt; returns the new factor.

        ``estimated`` is the *raw* estimate of that same prompt (default: the
        current ``raw``, right for a call made with exactly what is counted
        now). Each observation moves the factor toward reported/estimated;
        both the observation and the factor stay within ``CALIBRATION_BOUNDS``.
        Prompts under ``MIN_CALIBRATION_TOKENS`` are ignored.
        """
        basis = self.raw if estimated is None else estimated
        if reported_prompt_tokens <= 0 or basis < MIN_CALIBRATION_TOKENS:
            return self._factor
        low, high = CALIBRATION_BOUNDS
        observed = min(high, max(low, reported_prompt_tokens / basis))
        self._observations += 1
        weight = max(CALIBRATION_SMOOTHING, 1 / self._observations)
        # Averaged in log space, so over- and under-estimates pull equally hard.
        blended = math.exp((1 - weight) * math.log(self._factor) + weight * math.log(observed))
        self._factor = min(high, max(low, blended))
        return self._factor

    def __repr__(self) -> str:
        return f"TokenTally(messages={self._count}, raw={self.raw}, factor={self._factor:.3f})"
