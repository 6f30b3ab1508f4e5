"""The long answer ``bench.stream``'s model writes, and the verdict on what a chat shows of it at the end.

The answer is numbered words (``w001 w002 ...``) in short paragraphs, plain text so that
every platform shows it as written and every chunking cuts it between words. The fake model
server streams one word per delta and counts a word as a token, so an answer of 800 tokens is
800 words (about 4,000 characters: one message on Telegram and Slack, three on Discord). What a chat
shows is then judged by the numbers each bot message carries, in the order the messages were
sent:

* a *copy* of the answer is a run of messages whose numbers, joined, are 1..N exactly (one
  message, or the chunks of a long answer in order);
* ``lost``: the chat shows no copy;
* ``duplicated``: it shows two copies, or another message with exactly the numbers of one of
  the copy's chunks (the same chunk posted twice);
* ``left_partial``: any other message with answer words, i.e. one still showing part of the
  answer (a streamed message a crash left half written, marked as interrupted or not).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

WORD = re.compile(r"\bw(\d{3})\b")
MAX_WORDS = 999
PARAGRAPH_WORDS = 12


def answer_text(words: int) -> str:
    """``w001 w002 ...``, PARAGRAPH_WORDS to a paragraph."""
    if not 1 <= words <= MAX_WORDS:
        raise ValueError(f"an answer has 1 to {MAX_WORDS} words, not {words}")
    numbered = [f"w{n:03d}" for n in range(1, words + 1)]
    return "\n\n".join(" ".join(numbered[i : i + PARAGRAPH_WORDS]) for i in range(0, words, PARAGRAPH_WORDS))


@dataclass(frozen=True)
class Verdict:
    copies: int
    duplicated: bool
    partial_messages: int

    @property
    def lost(self) -> bool:
        return self.copies == 0


def judge(messages: Sequence[str], words: int) -> Verdict:
    """What a chat showing ``messages`` (in the order sent) shows of an answer of ``words`` words."""
    numbered = [[int(n) for n in WORD.findall(text)] for text in messages]
    numbered = [numbers for numbers in numbered if numbers]
    copies: list[list[int]] = []  # each copy: the indexes of its messages
    chain: list[int] = []
    expected = 1
    for index, numbers in enumerate(numbered):
        if numbers != list(range(expected, expected + len(numbers))):
            chain, expected = [], 1  # a gap: a copy can only start again at the first word
            if numbers != list(range(1, len(numbers) + 1)):
                continue
        chain.append(index)
        expected += len(numbers)
        if expected > words:
            copies.append(chain)
            chain, expected = [], 1
    in_copy = {index for copy in copies for index in copy}
    chunks = [numbered[index] for index in copies[0]] if copies else []
    repeated = [n for i, n in enumerate(numbered) if i not in in_copy and n in chunks]
    partial = [n for i, n in enumerate(numbered) if i not in in_copy and n not in chunks]
    return Verdict(len(copies), len(copies) > 1 or bool(repeated), len(partial))
