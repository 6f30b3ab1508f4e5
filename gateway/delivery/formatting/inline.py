"""Inline Markdown: code spans, emphasis, strikethrough, spoilers, links and platform entities.

Emphasis follows the CommonMark delimiter rules, with three changes for what
language models actually write:

* a single ``*`` between two ASCII letters or digits is literal (``2*3*4``, ``a*b``),
  and so is any ``*`` run between two digits (``2**10``);
* ``__name__`` around a bare identifier stays literal (``__init__``);
* wide characters (CJK, emoji) count as punctuation when deciding whether a run
  can open or close, so ``这是**重要**的`` and ``**“引号”**的`` work.

Everything the parser does not recognise stays as literal text: it never fails.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Final

from gateway.delivery.formatting.ir import Line, Span, Style, TextKind, tidy
from gateway.delivery.formatting.links import AUTOLINK, EMAIL, ENTITY, bare_url, link_destination, safe_href

_ESCAPABLE: Final = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_SPECIAL: Final = re.compile(r"[\\`\n*_~|!\[\]<]|(?i:https?://)")
"""Where the scanner has work to do; text in between is copied as it is."""


@dataclass(slots=True)
class _Text:
    text: str
    kind: TextKind = TextKind.TEXT


@dataclass(slots=True)
class _Code:
    text: str


@dataclass(slots=True)
class _Break:
    pass


@dataclass(slots=True)
class _Delim:
    char: str
    count: int
    orig: int
    can_open: bool
    can_close: bool


@dataclass(slots=True)
class _Bracket:
    image: bool
    active: bool = True


@dataclass(slots=True)
class _Styled:
    style: Style
    children: list[_Node]


@dataclass(slots=True)
class _Link:
    href: str | None
    children: list[_Node]
    image: bool = False
    visible: bool = True
    """Whether the link text shows anything (worked out once, when the link is made)."""


_Node = _Text | _Code | _Break | _Delim | _Bracket | _Styled | _Link


def parse_inline(source: str) -> tuple[Line, ...]:
    """Parse the inline content of one block; each newline starts a new :data:`Line`."""
    scanner = _Scanner(source)
    nodes = scanner.run()
    _match_emphasis(nodes)
    lines: list[list[Span]] = [[]]
    _flatten(nodes, lines)
    return tuple(tidy(line) for line in lines)


def closers(source: str) -> str:
    """What closes the inline formatting still open at the end of ``source`` (the unfinished last line
    of a reply being written): a code span's backticks, then the emphasis, strikethrough and spoiler
    runs that could still be closed, innermost first. Empty when nothing is open."""
    scanner = _Scanner(source)
    nodes = scanner.run()
    code = scanner.open_code
    if code:
        nodes = _Scanner(source + code).run()
    _match_emphasis(nodes)
    runs = [node.char * node.count for node in nodes if isinstance(node, _Delim) and node.can_open and node.count]
    return code + "".join(reversed(runs))


@lru_cache(maxsize=4096)
def _is_punct(char: str) -> bool:
    return unicodedata.category(char)[0] in "PS" or unicodedata.east_asian_width(char) in ("W", "F")


def _flanking(prev: str, nxt: str) -> tuple[bool, bool]:
    left = not nxt.isspace() and (not _is_punct(nxt) or prev.isspace() or _is_punct(prev))
    right = not prev.isspace() and (not _is_punct(prev) or nxt.isspace() or _is_punct(nxt))
    return left, right


def _ascii_alnum(char: str) -> bool:
    return char.isascii() and char.isalnum()


@dataclass(slots=True)
class _Scanner:
    src: str
    pos: int = 0
    nodes: list[_Node] = field(default_factory=list)
    buf: list[str] = field(default_factory=list)
    brackets: list[int] = field(default_factory=list)
    open_code: str = ""
    """The backticks of the first code span left open (no closing run): what would close it."""

    def run(self) -> list[_Node]:
        src, n = self.src, len(self.src)
        while self.pos < n:
            found = _SPECIAL.search(src, self.pos)
            stop = found.start() if found else n
            if stop > self.pos:
                self.buf.append(src[self.pos : stop])
                self.pos = stop
            if stop == n:
                break
            char = src[stop]
            handler = _HANDLERS.get(char)
            if (handler is not None and handler(self)) or (char in "hH" and self._bare_url()):
                continue
            self.buf.append(char)
            self.pos += 1
        self._flush()
        for index in self.brackets:
            bracket = self.nodes[index]
            assert isinstance(bracket, _Bracket)
            self.nodes[index] = _Text("![" if bracket.image else "[")
        return self.nodes

    def _flush(self) -> None:
        if self.buf:
            self.nodes.append(_Text("".join(self.buf)))
            self.buf.clear()

    def _push(self, node: _Node) -> None:
        self._flush()
        self.nodes.append(node)

    def _run_length(self, char: str) -> int:
        end = self.pos
        while end < len(self.src) and self.src[end] == char:
            end += 1
        return end - self.pos

    def backslash(self) -> bool:
        nxt = self.src[self.pos + 1 : self.pos + 2]
        if nxt == "\n":
            self._push(_Break())
        elif nxt in _ESCAPABLE and nxt:
            self.buf.append(nxt)
        else:
            return False
        self.pos += 2
        return True

    def backtick(self) -> bool:
        length = self._run_length("`")
        start = self.pos + length
        closer = re.compile(rf"(?<!`)`{{{length}}}(?!`)")
        found = closer.search(self.src, start)
        if found is None:
            self.open_code = self.open_code or "`" * length
            self.buf.append("`" * length)
            self.pos = start
            return True
        content = self.src[start : found.start()].replace("\n", " ")
        if len(content) > 2 and content[0] == content[-1] == " " and content.strip():
            content = content[1:-1]
        self._push(_Code(content))
        self.pos = found.end()
        return True

    def newline(self) -> bool:
        self._push(_Break())
        self.pos += 1
        while self.pos < len(self.src) and self.src[self.pos] in " \t":
            self.pos += 1
        return True

    def delimiter(self) -> bool:
        char = self.src[self.pos]
        length = self._run_length(char)
        if char in "~|" and length != 2:
            self.buf.append(char * length)
            self.pos += length
            return True
        prev = self.src[self.pos - 1] if self.pos else "\n"
        nxt = self.src[self.pos + length] if self.pos + length < len(self.src) else "\n"
        left, right = _flanking(prev, nxt)
        if char == "_":
            can_open = left and (not right or _is_punct(prev))
            can_close = right and (not left or _is_punct(nxt))
        else:
            can_open, can_close = left, right
        literal_star = char == "*" and (
            (length == 1 and _ascii_alnum(prev) and _ascii_alnum(nxt)) or (prev.isdigit() and nxt.isdigit())
        )
        if literal_star:
            can_open = can_close = False
        self._push(_Delim(char, length, length, can_open, can_close))
        self.pos += length
        return True

    def open_bracket(self) -> bool:
        image = self.src[self.pos] == "!"
        if image and not self.src.startswith("[", self.pos + 1):
            return False
        self._flush()
        self.brackets.append(len(self.nodes))
        self.nodes.append(_Bracket(image))
        self.pos += 2 if image else 1
        return True

    def close_bracket(self) -> bool:
        if not self.brackets:
            return False
        index = self.brackets.pop()
        opener = self.nodes[index]
        assert isinstance(opener, _Bracket)
        target = link_destination(self.src, self.pos + 1) if opener.active else None
        if target is None:
            self.nodes[index] = _Text("![" if opener.image else "[")
            return False
        self._flush()
        children = self.nodes[index + 1 :]
        _match_emphasis(children)
        del self.nodes[index:]
        self.nodes.append(_Link(safe_href(target[0]), children, opener.image, _has_text(children)))
        if not opener.image:
            for earlier in self.brackets:
                bracket = self.nodes[earlier]
                if isinstance(bracket, _Bracket) and not bracket.image:
                    bracket.active = False
        self.pos = target[1]
        return True

    def angle(self) -> bool:
        entity = ENTITY.match(self.src, self.pos)
        if entity:
            self._push(_Text(entity.group(), TextKind.RAW))
            self.pos = entity.end()
            return True
        auto = AUTOLINK.match(self.src, self.pos)
        if auto:
            url = auto.group(1)
            if "|" in url:  # Slack's own <url|text> link syntax
                self._push(_Text(auto.group(), TextKind.RAW))
            else:
                self._push(_Link(safe_href(url), [_Text(url, TextKind.URL)]))
            self.pos = auto.end()
            return True
        email = EMAIL.match(self.src, self.pos)
        if email:
            self._push(_Link(f"mailto:{email.group(1)}", [_Text(email.group(1), TextKind.URL)]))
            self.pos = email.end()
            return True
        return False

    def _bare_url(self) -> bool:
        url = bare_url(self.src, self.pos)
        if url is None:
            return False
        self._push(_Text(url, TextKind.URL))
        self.pos += len(url)
        return True


_HANDLERS = {
    "\\": _Scanner.backslash,
    "`": _Scanner.backtick,
    "\n": _Scanner.newline,
    "*": _Scanner.delimiter,
    "_": _Scanner.delimiter,
    "~": _Scanner.delimiter,
    "|": _Scanner.delimiter,
    "!": _Scanner.open_bracket,
    "[": _Scanner.open_bracket,
    "]": _Scanner.close_bracket,
    "<": _Scanner.angle,
}


_STYLE_FOR = {"~": Style.STRIKE, "|": Style.SPOILER}


def _match_emphasis(nodes: list[_Node]) -> None:
    """Pair delimiter runs into styled groups, in place (CommonMark's process-emphasis)."""
    bottoms: dict[tuple[str, bool, int], int] = {}
    index = 0
    while index < len(nodes):
        closer = nodes[index]
        if not isinstance(closer, _Delim) or not closer.can_close or closer.count == 0:
            index += 1
            continue
        key = (closer.char, closer.can_open, closer.orig % 3)
        found = None
        for back in range(index - 1, bottoms.get(key, 0) - 1, -1):
            opener = nodes[back]
            if isinstance(opener, _Delim) and _pairs(opener, closer, nodes[back + 1 : index]):
                found = back
                break
        if found is None:
            bottoms[key] = index
            index += 1
            continue
        opener = nodes[found]
        assert isinstance(opener, _Delim)
        use = 2 if closer.char in "~|" or (opener.count >= 2 and closer.count >= 2) else 1
        style = _STYLE_FOR.get(closer.char, Style.BOLD if use == 2 else Style.ITALIC)
        opener.count -= use
        closer.count -= use
        nodes[found + 1 : index] = [_Styled(style, nodes[found + 1 : index])]
        index = found + 2
        for other, bottom in bottoms.items():
            bottoms[other] = min(bottom, found)
        if closer.count == 0:
            del nodes[index]
        if opener.count == 0:
            del nodes[found]
            index -= 1


def _pairs(opener: _Delim, closer: _Delim, inner: list[_Node]) -> bool:
    if opener.char != closer.char or not opener.can_open or opener.count == 0:
        return False
    if opener.char in "~|":
        return opener.count >= 2 and closer.count >= 2
    # CommonMark's "rule of 3": a run that can both open and close pairs only in sums not divisible by 3.
    both_ways = opener.can_close or closer.can_open
    if both_ways and (opener.orig + closer.orig) % 3 == 0 and (opener.orig % 3 or closer.orig % 3):
        return False
    if opener.char == "_" and opener.orig == closer.orig == 2 and len(inner) == 1:
        only = inner[0]
        if isinstance(only, _Text) and only.text.isidentifier():
            return False
    return True


def _flatten(nodes: list[_Node], lines: list[list[Span]]) -> None:
    """Append the spans of ``nodes`` to ``lines`` (a new line at each break), without recursion."""
    stack: list[tuple[Iterator[_Node], frozenset[Style], str | None]] = [(iter(nodes), frozenset(), None)]
    while stack:
        children, styles, href = stack[-1]
        node = next(children, None)
        if node is None:
            stack.pop()
        elif isinstance(node, _Text):
            lines[-1].append(Span(node.text, styles, href, node.kind))
        elif isinstance(node, _Code):
            lines[-1].append(Span(node.text, styles | {Style.CODE}, href))
        elif isinstance(node, _Break):
            lines.append([])
        elif isinstance(node, _Delim):
            if node.count:
                lines[-1].append(Span(node.char * node.count, styles, href))
        elif isinstance(node, _Bracket):
            lines[-1].append(Span("![" if node.image else "[", styles, href))
        elif isinstance(node, _Styled):
            stack.append((iter(node.children), styles | {node.style}, href))
        elif node.href and node.visible:
            stack.append((iter(node.children), styles, href or node.href))
        elif node.href:  # nothing to show but the address
            lines[-1].append(Span(node.href, styles, node.href, TextKind.URL))
        elif node.children:  # a link that may not be linked: its text alone
            stack.append((iter(node.children), styles, href))
        elif node.image:
            lines[-1].append(Span("image", styles, href))


def _has_text(nodes: list[_Node]) -> bool:
    pending = list(nodes)
    while pending:
        node = pending.pop()
        if isinstance(node, _Text | _Code) and node.text.strip():
            return True
        if isinstance(node, _Delim | _Bracket) or (isinstance(node, _Link) and node.visible):
            return True
        if isinstance(node, _Styled):
            pending.extend(node.children)
    return False
