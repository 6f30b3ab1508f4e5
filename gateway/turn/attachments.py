"""The turn's media step: the files of a fresh turn read before its user message is stored.

For each message of the batch that came with files, the media pipeline (``gateway/media/pipeline.py``)
downloads, checks and keeps them, outside the agent slot. What it gives back becomes the user's
turn (:func:`gateway.turn.input.compose`): the pictures and documents as the message's media parts,
transcripts as its text, and a short line for the model for each file that could not be used.

The user always knows what happened to their files:

* a file that could not be used is named in one short message before the answer ("I couldn't use
  report.pdf: it is 34 MB and the limit for documents is 20 MB.");
* a turn with nothing usable left (no words, no file the model can read) is answered by that message
  alone, without a model call, and its events are settled with it as the reply;
* when the session's model cannot see images and a picture comes, the user is told so once per
  session: the notice is queued in the outbox under a key of the session (``notice:vision:<id>``), and
  the outbox queues a key only once, so neither a second picture nor a restart repeats it.

A replayed turn (its user message stored before a crash) does not come here: its message already
holds its parts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

from adapters.contract import Adapter, InboundMessage
from agent import ChatMessage
from gateway.delivery.outbox import Delivery
from gateway.inbound.ledger import InboundLedger, Outcome, Reply
from gateway.operations.metrics import Metrics
from gateway.turn.conversations import Conversation, Conversations
from gateway.turn.input import as_sentence, compose

if TYPE_CHECKING:
    from gateway.media.pipeline import MediaPipeline, MediaProblem, Prepared

__all__ = ["NO_VISION_NOTICE", "MediaStep", "notice_for"]

log = structlog.get_logger("gateway.turn")

NO_VISION_NOTICE = (
    "The model I use here cannot see pictures, so I only go by your words about them. "
    "Describe what matters in a picture, or paste its text."
)


@dataclass(frozen=True, slots=True)
class _Read:
    """A batch's files as read: the user's turn, and what the user is told first."""

    message: ChatMessage
    problems: list[MediaProblem]
    usable: bool
    """Something for the model: words, a transcript, or a file it can read."""
    unseen: bool
    """Pictures came that the session's model cannot see."""


class MediaStep:
    def __init__(
        self,
        pipeline: MediaPipeline,
        *,
        adapters: Mapping[str, Adapter],
        delivery: Delivery,
        ledger: InboundLedger,
        conversations: Conversations,
        metrics: Metrics,
    ) -> None:
        self._pipeline = pipeline
        self._adapters = adapters
        self._delivery = delivery
        self._ledger = ledger
        self._conversations = conversations
        self._metrics = metrics

    async def user_message(
        self, turn_id: str, batch: Sequence[InboundMessage], conversation: Conversation, *, named: bool
    ) -> ChatMessage | None:
        """The user's turn for a fresh ``batch``, after telling the user about files that could not be used.

        None: nothing usable was left, and the batch is answered by the notice alone (settled here).
        """
        read = await self._read(batch, conversation, named=named)
        notice = notice_for(read.problems, unseen=read.unseen and not read.usable)
        if not read.usable:
            log.info("turn.media_only_notice", problems=len(read.problems), unseen=read.unseen)
            rows = await self._ledger.settle(batch, Outcome.ANSWERED, reply=Reply.to(batch, turn_id, notice))
            await self._delivery.deliver(rows)
            return None
        first = batch[0]
        where = {"platform": first.platform, "chat_id": first.chat_id, "thread_id": first.thread_id}
        if notice:
            await self._delivery.send_text(turn_id=f"notice:media:{turn_id}", reply_to=batch[-1].message_id,
                                           text=notice, **where)  # fmt: skip
        if read.unseen:
            # Keyed by the session: the outbox queues a key once, so this is said once per session.
            await self._delivery.send_text(turn_id=f"notice:vision:{conversation.record.id}", text=NO_VISION_NOTICE,
                                           **where)  # fmt: skip
        return read.message

    async def _read(self, batch: Sequence[InboundMessage], conversation: Conversation, *, named: bool) -> _Read:
        with_files = [m for m in batch if m.attachments]
        prepared: dict[str, Prepared] = {}
        if with_files:
            # At once: the pipeline bounds how many files are read at a time, across every chat.
            results = await asyncio.gather(*(self._pipeline.prepare(self._adapters[m.platform], m) for m in with_files))
            prepared = {m.event_id: r for m, r in zip(with_files, results, strict=True)}
            for message, result in zip(with_files, results, strict=True):
                self._count(message.platform, result)
        message = compose(batch, prepared, named=named)
        problems = [problem for result in prepared.values() for problem in result.problems]
        pictures = any(part.kind == "image" for part in message.media)
        vision = not pictures or self._conversations.agent_session(conversation.record, conversation.records).vision
        seen = [part for part in message.media if vision or part.kind != "image"]
        unseen = len(seen) < len(message.media)
        words = any(m.text.strip() for m in batch) or any(r.transcripts for r in prepared.values())
        # Nothing usable: files came, and neither words nor a file the model can read are left.
        usable = words or bool(seen) or not (problems or unseen)
        return _Read(message, problems, usable=usable, unseen=unseen)

    def _count(self, platform: str, result: Prepared) -> None:
        """``switchboard_media_total{platform,kind,outcome}``: each file once, by what became of it."""
        media = self._metrics.media
        for part in result.parts:
            media.inc(platform, part.kind, "ok")
        for transcript in result.transcripts:
            media.inc(platform, transcript.origin, "transcribed")
        for problem in result.problems:
            media.inc(platform, problem.kind, problem.reason)


def notice_for(problems: Sequence[MediaProblem], *, unseen: bool = False) -> str:
    """What the user is told about files that could not be used, in one short message ("" for none).

    ``unseen``: the turn is answered by this notice alone and held pictures the model cannot see.
    """
    if len(problems) == 1:
        lines = [as_sentence(f"I couldn't use {problems[0].what}: {problems[0].user_text}")]
    elif problems:
        lines = ["I couldn't use some of what you sent:",
                 *(as_sentence(f"- {p.what}: {p.user_text}") for p in problems)]  # fmt: skip
    else:
        lines = []
    if unseen:
        lines.append(NO_VISION_NOTICE)
    return "\n".join(lines)

