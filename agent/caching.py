"""Prompt caching: where the cache breakpoints go, when caching is on, and which TTL to pay for.

Breakpoints follow the *system_and_3* strategy: one on the system prompt and
one on each of the last three non-system messages that can carry one (four in
all, Anthropic's maximum). A message of blank text only is never sent as such
(the API refuses a whitespace-only text block), so it carries none: the earlier
messages take the breakpoints. A user message's pictures and documents come before
its text, so its breakpoint sits on the text block; with no text, on its last picture
(natively; the envelope takes them on text only). Their bytes are the same on every
call, so the marked prefix stays stable. Call-time text (``ModelRequest.ephemeral``)
is added after the breakpoints are placed, as a block of its own. The system prompt is frozen per session, so the
first breakpoint is read from cache on every call; the rolling three keep the
growing conversation cached turn after turn.

The tool definitions need no breakpoint of their own: Anthropic builds the prompt as tools, then
system, then messages, and a breakpoint caches everything before it, so the one on the system
prompt covers the tools too. That holds only while the tools stay the same, which is why a
session's tool list is fixed when it starts (:mod:`agent.tools.offer`): a tool server that
changes its list changes new sessions, never the cached prefix of a running one. (OpenAI-style
endpoints put the tools first as well and cache the longest prefix they have seen.)

Markers are applied to chat-completions style message dicts (the neutral wire
shape every provider starts from) and never mutate their input.

TTL policy (``model.cache_ttl``)
--------------------------------
``5m`` and ``1h`` are fixed. ``auto`` chooses per session from the gaps between
the user's messages. A 5-minute entry is cheap to write (1.25x input price) but
gone when the user takes a coffee break; a 1-hour entry costs 2x to write and
survives it. With ``f5`` and ``f60`` the shares of gaps shorter than 5 and 60
minutes, and ``r`` the share of new tokens a turn adds to a prefix of P tokens,
one turn costs about (in units of P times the plain input price)::

    5m:  f5  * (0.1 + 1.25 r) + (1 - f5)  * 1.25 (1 + r)
    1h:  f60 * (0.1 + 2.00 r) + (1 - f60) * 2.00 (1 + r)

(a live entry is read at 0.1 and only the new tokens are written; an expired
one is written whole). ``auto`` estimates f5 and f60 from the session's
observed gaps plus a prior that says chat users often answer after several
minutes (so a new session starts on 1h).

It also tells *warm* turns (the last write is still alive) from *cold* ones
(it expired: the whole prefix is written again anyway) and may pick a
different TTL for each: writing a whole prefix at 2.0 to keep it an hour only
pays when 5-60 minute gaps are common. The pair (warm TTL, cold TTL) with the
lowest expected cost per turn wins, where the share of warm turns follows from
the gaps as a two-state chain (see :func:`chain_cost`). With the same TTL in
both states this is the single-TTL cost above. Users who mostly come back after
more than an hour get 5m: an hour-long entry would expire anyway and cost more.
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlparse

Ttl = Literal["5m", "1h"]
MAX_BREAKPOINTS = 4
WRITE_PRICE: dict[Ttl, float] = {"5m": 1.25, "1h": 2.0}
READ_PRICE = 0.1


@dataclass(frozen=True, slots=True)
class CachePolicy:
    enabled: bool
    native: bool
    """True for the Anthropic Messages layout; False for an OpenAI-style envelope (OpenRouter)."""
    reason: str = ""


def cache_policy(provider: str, model: str, base_url: str | None) -> CachePolicy:
    """Caching is on for Claude on the Anthropic API and for Claude through OpenRouter."""
    is_claude = "claude" in model.lower()
    host = (urlparse(base_url).hostname or "") if base_url else ""
    if provider == "anthropic" and is_claude:
        return CachePolicy(True, True, "Claude on the Anthropic Messages API")
    if provider == "openai" and is_claude and "openrouter" in host:
        return CachePolicy(True, False, "Claude through OpenRouter")
    return CachePolicy(False, False, "the endpoint caches automatically or not at all")


TTL_SECONDS: dict[Ttl, float] = {"5m": 300.0, "1h": 3600.0}


def marker(ttl: Ttl) -> dict[str, str]:
    if ttl not in TTL_SECONDS:
        raise ValueError(f"cache TTL must be '5m' or '1h', got {ttl!r}")
    return {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": "1h"}


def apply_cache_markers(messages: Sequence[dict[str, Any]], *, ttl: Ttl = "5m", native: bool = True) -> list[dict[str, Any]]:
    """A copy of ``messages`` with up to four ``cache_control`` breakpoints (system + last 3)."""
    marked = copy.deepcopy(list(messages))
    if not marked:
        return marked
    mark = marker(ttl)
    used = 0
    if marked[0].get("role") == "system":
        _place(marked[0], mark, native)
        used = 1
    candidates = [m for m in marked[used:] if m.get("role") != "system" and _can_carry(m, native)]
    for message in candidates[-(MAX_BREAKPOINTS - used):]:
        _place(message, mark, native)
    return marked


def _can_carry(message: dict[str, Any], native: bool) -> bool:
    """Whether the message reaches the API with a block for a breakpoint to sit on.

    Blank text is never sent (Anthropic refuses a whitespace-only text block), so a message of
    nothing else takes no breakpoint: the one it would have had goes to an earlier message.
    Natively a picture or document block can carry one (a message of a photo and no caption);
    the OpenAI-style envelope puts breakpoints on text parts only.
    """
    content = message.get("content")
    if native:
        if message.get("role") == "tool" or message.get("tool_calls"):
            return True  # a tool_result block (never empty), or tool_use blocks
        if isinstance(content, list):
            return any(not _blank_text(block) for block in content)
        return visible_text(content)
    if isinstance(content, str):
        return visible_text(content)
    # The envelope takes a breakpoint on a text part only: a message that ends in a picture has none.
    last = content[-1] if isinstance(content, list) and content else None
    return isinstance(last, dict) and last.get("type") == "text" and visible_text(last.get("text"))


def visible_text(text: Any) -> bool:
    """Text that shows: a string with more than whitespace. Blank text is sent on no layout (the
    Anthropic API refuses a whitespace-only text block) and so can carry no cache breakpoint."""
    return isinstance(text, str) and bool(text.strip())


def _blank_text(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "text" and not visible_text(block.get("text"))


def _place(message: dict[str, Any], mark: dict[str, str], native: bool) -> None:
    content = message.get("content")
    if message.get("role") == "tool" and native:
        message["cache_control"] = dict(mark)
    elif visible_text(content):
        message["content"] = [{"type": "text", "text": content, "cache_control": dict(mark)}]
    elif isinstance(content, list) and content and isinstance(content[-1], dict):
        content[-1]["cache_control"] = dict(mark)
    else:
        message["cache_control"] = dict(mark)


class TtlAdvisor:
    """Chooses 5m or 1h for one session from the gaps between its user's messages."""

    # Prior pseudo-observations: what we assume before a session has history.
    PRIOR_WEIGHT = 3.0
    PRIOR_F5 = 0.35
    PRIOR_F60 = 0.80
    WINDOW = 50

    def __init__(self, configured: Literal["5m", "1h", "auto"] = "auto") -> None:
        self.configured = configured
        self._gaps: deque[float] = deque(maxlen=self.WINDOW)
        self._under5 = 0  # gaps in the window under 5 and under 60 minutes, kept as gaps come and go
        self._under60 = 0
        self._last_at: float | None = None
        self._last_write: tuple[float, Ttl] | None = None

    @classmethod
    def from_timestamps(cls, configured: Literal["5m", "1h", "auto"], times: Iterable[float]) -> TtlAdvisor:
        """Rebuild from stored user-message times (e.g. after a restart)."""
        advisor = cls(configured)
        for at in times:
            advisor.observe(at)
        return advisor

    def observe(self, at: float) -> None:
        """Record that the user sent a message at wall-clock time ``at``."""
        if self._last_at is not None and at >= self._last_at:
            gaps = self._gaps
            if len(gaps) == gaps.maxlen:
                leaving = gaps[0]
                self._under5 -= leaving < 300
                self._under60 -= leaving < 3600
            gap = at - self._last_at
            gaps.append(gap)
            self._under5 += gap < 300
            self._under60 += gap < 3600
        self._last_at = at

    def shares(self) -> tuple[float, float]:
        """Estimated shares of gaps under 5 and under 60 minutes."""
        n = len(self._gaps)
        w = self.PRIOR_WEIGHT
        return (self._under5 + w * self.PRIOR_F5) / (n + w), (self._under60 + w * self.PRIOR_F60) / (n + w)

    def record_write(self, at: float, ttl: Ttl) -> None:
        """The session's cache was last written at ``at`` with ``ttl``."""
        self._last_write = (at, ttl)

    def is_cold(self, now: float) -> bool:
        """Whether the last write has expired by ``now`` (a new session is cold)."""
        if self._last_write is None:
            return True
        at, ttl = self._last_write
        return now - at >= TTL_SECONDS[ttl]

    def choose(self, new_share: float = 0.1, *, cold: bool = False) -> Ttl:
        """The TTL for the next turn; ``new_share`` is r, the new tokens' share of the prompt,
        ``cold`` says the cached prefix has expired (see :meth:`is_cold`)."""
        if self.configured != "auto":
            return self.configured
        f5, f60 = self.shares()
        pairs: list[tuple[Ttl, Ttl]] = [("5m", "5m"), ("1h", "1h"), ("1h", "5m"), ("5m", "1h")]
        warm_ttl, cold_ttl = min(pairs, key=lambda pair: chain_cost(pair[0], pair[1], f5, f60, new_share))
        return cold_ttl if cold else warm_ttl


def turn_cost(ttl: Ttl, alive: float, new_share: float) -> float:
    """Expected input cost of one turn per prefix token with one TTL (see the module docstring)."""
    write = WRITE_PRICE[ttl]
    return alive * (READ_PRICE + write * new_share) + (1 - alive) * write * (1 + new_share)


def chain_cost(warm_ttl: Ttl, cold_ttl: Ttl, f5: float, f60: float, new_share: float) -> float:
    """Expected cost per turn (per prefix token) when warm turns write ``warm_ttl`` and cold ones ``cold_ttl``.

    A warm turn reads the prefix and writes the new share; a cold turn writes everything. The next
    turn is warm when its gap is shorter than the TTL just written, so the long-run share of warm
    turns is that of a two-state chain. With equal TTLs this equals :func:`turn_cost`.
    """
    alive = {"5m": f5, "1h": f60}
    stay, recover = alive[warm_ttl], alive[cold_ttl]
    leave = (1 - stay) + recover
    warm = recover / leave if leave > 0 else 1.0
    warm_cost = READ_PRICE + WRITE_PRICE[warm_ttl] * new_share
    return warm * warm_cost + (1 - warm) * WRITE_PRICE[cold_ttl] * (1 + new_share)
