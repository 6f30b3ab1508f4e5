"""What each chat command does. Commands are answered at once, even while a turn runs."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import structlog

from adapters.contract import InboundMessage
from agent import MemoryBank
from gateway.inbound.access import AccessControl
from gateway.commands.parsing import HELP_TEXT, Command
from gateway.turn.conversations import Conversations
from gateway.inbound.lanes import Lanes
from gateway.commands.memory import MemoryCommands
from gateway.inbound.pairing import Pairing
from gateway.inbound.session_key import SessionKey
from storage import StorageEngine

log = structlog.get_logger("gateway.commands")


class CommandHandlers:
    def __init__(
        self,
        *,
        store: StorageEngine,
        conversations: Conversations,
        lanes: Lanes[InboundMessage],
        access: AccessControl,
        pairing: Pairing,
        memories: MemoryBank,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._conversations = conversations
        self._lanes = lanes
        self._access = access
        self._pairing = pairing
        self._clock = clock
        memory = MemoryCommands(memories, conversations, lanes, clock)
        self._handlers: dict[str, Callable[[Command, InboundMessage, SessionKey], Awaitable[str]]] = {
            "help": self._help,
            "new": self._new,
            "stop": self._stop,
            "status": self._status,
            "usage": self._usage,
            "compress": self._compress,
            "memory": memory.show,
            "forget": memory.forget,
            "whoami": self._whoami,
        }

    async def handle(self, command: Command, message: InboundMessage, key: SessionKey) -> str:
        """Run ``command``; returns its answer, which the intake sends as the command's settlement."""
        log.info("command.received", command=command.name, platform=message.platform, chat=message.chat_id)
        return await self._handlers[command.name](command, message, key)

    async def _help(self, command: Command, message: InboundMessage, key: SessionKey) -> str:
        return HELP_TEXT

    async def _new(self, command: Command, message: InboundMessage, key: SessionKey) -> str:
        stopped = self._lanes.stop(str(key))
        ended = await self._conversations.reset(key, "user")
        if ended is None and not stopped:
            return "This is already a fresh conversation. Go ahead."
        return "Started a new conversation; I've set the earlier one aside. What's next?"

    async def _stop(self, command: Command, message: InboundMessage, key: SessionKey) -> str:
        if self._lanes.stop(str(key)):
            return "Stopped. Anything I had already said or saved stays; send a new message when you're ready."
        return "Nothing is running right now."

    async def _status(self, command: Command, message: InboundMessage, key: SessionKey) -> str:
        record = await self._store.find_open_session(str(key))
        if record is None:
            return "No conversation yet: your next message starts one."
        prompt = record.input_tokens + record.cache_read_tokens + record.cache_write_tokens
        share = record.cache_read_tokens / prompt if prompt else 0.0
        age = _duration(self._clock() - record.started_at)
        # "idle" would read like the idle reset policy: say what the bot is doing instead.
        doing = "answering now" if self._lanes.is_busy(str(key)) else "waiting for your next message"
        return "\n".join(
            [
                f"Session: {record.id}",
                f"Started: {age} ago",
                f"Now: {doing}",
                f"Messages: {record.message_count}",
                f"Tokens: {prompt:,} in, {record.output_tokens:,} out; last prompt {record.last_prompt_tokens:,}",
                f"Read from cache: {share:.0%} of input",
                f"Model: {record.model}",
            ]
        )

    async def _usage(self, command: Command, message: InboundMessage, key: SessionKey) -> str:
        record = await self._store.find_open_session(str(key))
        today = await self._store.usage_since(_midnight(self._clock()))
        lines = []
        if record is not None:
            tokens = record.input_tokens + record.cache_read_tokens + record.cache_write_tokens + record.output_tokens
            lines.append(f"This conversation: {tokens:,} tokens, ${record.cost_usd:.4f}")
        total = today.input_tokens + today.cache_read_tokens + today.cache_write_tokens + today.output_tokens
        lines.append(f"Today (all conversations): {total:,} tokens in {today.calls:,} model calls, ${today.cost_usd:.4f}")
        return "\n".join(lines)

    async def _compress(self, command: Command, message: InboundMessage, key: SessionKey) -> str:
        async with self._lanes.exclusive(str(key)) as held:
            if not held:
                return "I'm in the middle of a reply; send /compress again when it's done."
            # Messages sent meanwhile wait on the lane, so none can land in the parent after the split.
            return await self._compact(command, key)

    async def _compact(self, command: Command, key: SessionKey) -> str:
        record = await self._store.find_open_session(str(key))
        if record is None or record.message_count < 4:
            return "This conversation is still short; there is nothing to summarise yet."
        conversation = await self._conversations.open(key)
        if len(conversation.history) < 5:
            return "This conversation is still short; there is nothing to summarise yet."
        agent = self._conversations.agent_session(conversation.record, conversation.records)
        result = await agent.compact(conversation.history, focus=command.args or None)
        if not result.compacted:
            why = {"nothing_to_compress": "the recent messages are all kept as they are"}.get(result.reason, result.reason)
            return f"Nothing was summarised ({why}). The conversation is unchanged."
        child = await self._conversations.split(conversation.record, result.messages)
        log.info("command.compacted", parent=conversation.record.id, child=child.id, dropped=result.dropped)
        return (
            f"Summarised {result.dropped} older messages; about {result.tokens_before:,} tokens became "
            f"{result.tokens_after:,}. The recent messages are kept word for word."
        )

    async def _whoami(self, command: Command, message: InboundMessage, key: SessionKey) -> str:
        approved = await self._pairing.is_approved(message.platform, message.user_id)
        decision = self._access.who(message, approved=approved)
        status = "you can talk to me" if decision.allowed else "you are not on the list yet"
        lines = [
            f"Name: {message.user_name or '(unknown)'}",
            f"{message.platform} user id: {message.user_id}",
            f"Chat id: {message.chat_id}" + (f", thread {message.thread_id}" if message.thread_id else ""),
            f"Access: {status} ({decision.reason})",
        ]
        return "\n".join(lines)


def _duration(seconds: float) -> str:
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if hours < 48 else f"{hours // 24} days"


def _midnight(now: float) -> float:
    local = time.localtime(now)
    return time.mktime((local.tm_year, local.tm_mon, local.tm_mday, 0, 0, 0, 0, 0, -1))
