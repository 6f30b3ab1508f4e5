"""The systems ``bench/gateway.py`` drives: the real gateway with an in-process model, and the bare-queue floor.

Both expose the same face (:class:`System`): a loopback adapter to inject
messages into and a :class:`Tracker` that notes, per message, when it was
injected, accepted, handed to the model, answered by the model and when its
reply reached the adapter.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from adapters.contract import AccessPolicy, InboundMessage, Intake, OutboundMessage
from agent import (
    Agent,
    AgentSettings,
    CachePolicy,
    ChatMessage,
    ModelRequest,
    ModelResponse,
    ModelRouter,
    ModelTarget,
    Price,
    PriceTable,
    Provider,
    Usage,
)
from config import load_config
from gateway.app import Gateway
from gateway.runner import search_function, settle_runtime
from gateway.store_setup import open_configured_store
from storage import StorageEngine
from tests.fakes.adapter import LoopbackAdapter

MODEL = "claude-sonnet-4-6"
MAX_CONCURRENT = 64
"""``sessions.max_concurrent_turns``: agents working at once (the gateway's default is 16); the floor
limits its model calls the same way. Neither holds a slot while it sends the reply."""
CACHE = CachePolicy(True, True, "bench: as for Claude on the Anthropic API (the default deployment)")
TAG = re.compile(r"msg(\d{7})")


class ZeroLatencyProvider(Provider):
    """An in-process model: answers at once with a short text echoing the user's tags, and plausible usage."""

    name = "bench-zero"

    def __init__(self, sink: Tracker) -> None:
        self._sink = sink

    async def complete(self, request: ModelRequest, *, on_text: Callable[[str], None] | None = None) -> ModelResponse:
        """The answer at once, whole; nothing is streamed (``on_text`` is never called)."""
        started = time.perf_counter()
        tags = TAG.findall(request.messages[-1].content)
        prompt = (len(request.system) + sum(len(m.content) for m in request.messages)) // 4
        if request.cache_ttl is not None:  # a warm cache: the prefix is read, the new tail written
            read = prompt * 9 // 10
            usage = Usage(input_tokens=3, output_tokens=12, cache_read_tokens=read, cache_write_tokens=prompt - read - 3)
        else:
            usage = Usage(input_tokens=prompt, output_tokens=12)
        reply = ChatMessage.assistant("Done: the deploy waits for review. " + " ".join(f"msg{t}" for t in tags))
        response = ModelResponse(reply, usage, "end_turn", request.model)
        finished = time.perf_counter()
        self._sink.model_call(tags, started, finished)
        return response


@dataclass
class Tracker:
    """Per-message timestamps (perf_counter seconds), keyed by the message's number."""

    injected: dict[int, float] = field(default_factory=dict)
    accepted: dict[int, float] = field(default_factory=dict)
    model_in: dict[int, float] = field(default_factory=dict)
    model_out: dict[int, float] = field(default_factory=dict)
    model_s: dict[int, float] = field(default_factory=dict)
    observed: dict[int, float] = field(default_factory=dict)
    waiting: dict[int, asyncio.Future[None]] = field(default_factory=dict)
    replies: int = 0
    multi: int = 0  # replies answering more than one message (coalesced turns)

    def model_call(self, tags: Sequence[str], started: float, finished: float) -> None:
        for tag in tags:
            n = int(tag)
            self.model_in.setdefault(n, started)
            self.model_out[n] = finished
            self.model_s[n] = self.model_s.get(n, 0.0) + (finished - started)

    def reply(self, text: str, observed: float) -> None:
        self.replies += 1
        numbers = [int(t) for t in TAG.findall(text)]
        self.multi += len(numbers) > 1
        for n in numbers:
            self.observed[n] = observed
            waiter = self.waiting.pop(n, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    def added_ms(self, numbers: Sequence[int]) -> list[float]:
        return [(self.observed[n] - self.injected[n] - self.model_s.get(n, 0.0)) * 1000 for n in numbers]


class BenchAdapter(LoopbackAdapter):
    """The loopback test adapter, noting when each reply reaches it.

    Its ``send`` only notes the reply: the test adapter's list of sent messages and the condition
    tests wait on are not used here, and would count as the system's time (gateway and floor alike).
    """

    def __init__(self, tracker: Tracker) -> None:
        super().__init__()
        self._tracker = tracker

    async def send(self, message: OutboundMessage) -> str:
        self._tracker.reply(message.text, time.perf_counter())
        return f"m{next(self._message_ids)}"


@dataclass
class System:
    """One system under test: its adapter (inject, replies), its tracker and how to stop it."""

    name: str
    adapter: BenchAdapter
    tracker: Tracker
    stop: Callable[[], Awaitable[None]]
    check: Callable[[], Awaitable[None]]


# -- the systems ------------------------------------------------------------------------------------


async def start_gateway(home: Path) -> System:
    config = {
        "model": {"provider": "anthropic", "name": MODEL, "api_key": "bench-unused"},
        "sessions": {"debounce_ms": 0, "max_concurrent_turns": MAX_CONCURRENT},
        "health": {"port": 0},
        "logging": {"console": False},
        "gateway": {"drain_timeout": 30},
    }
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    loaded = load_config(home / "config.yaml", {"SWITCHBOARD_HOME": str(home)}, create_home=True)
    store = await open_configured_store(loaded)
    tracker = Tracker()
    agent = build_bench_agent(loaded, ModelRouter([ModelTarget(ZeroLatencyProvider(tracker), MODEL, CACHE)]), store)
    adapter = BenchAdapter(tracker)
    gateway = Gateway(loaded, store, [adapter], agent, extra_access={"loopback": AccessPolicy(allow_all=True)})
    await gateway.start()
    settle_runtime()  # as `switchboard run` does once the gateway is up

    async def check() -> None:
        deadline = time.perf_counter() + 30
        while len(gateway.lanes) and time.perf_counter() < deadline:  # replies go out before events are marked done
            await asyncio.sleep(0.01)
        unfinished = await store.inbox_unfinished()
        if unfinished:
            raise RuntimeError(f"benchmark broken: {len(unfinished)} inbox events not done")

    return System("gateway", adapter, tracker, gateway.shutdown, check)


def build_bench_agent(loaded: Any, router: ModelRouter, store: StorageEngine) -> Agent:
    """As ``gateway.agent_factory.build_agent``, with ``router`` for both the main and the summary model."""
    s = loaded.settings
    prices = PriceTable({name: Price(p.input, p.output, p.cache_read, p.cache_write) for name, p in s.model.prices.items()})
    settings = AgentSettings(
        home=loaded.home, context_length=s.model.context_length, compression_enabled=s.compression.enabled,
        threshold=s.compression.threshold, target_ratio=s.compression.target_ratio,
        protect_last_n=s.compression.protect_last_n, cache_ttl=s.model.cache_ttl, max_tokens=s.model.max_tokens,
        max_iterations=s.agent.max_iterations, tool_timeout=s.agent.tool_timeout, system_message=s.agent.system_message,
    )  # fmt: skip
    return Agent(settings, router, summary_router=router, search=search_function(store), prices=prices)


class QueueFloor:
    """The same flow through bare asyncio: a queue and a worker per session, 64 model calls at once, no storage."""

    def __init__(self, provider: Provider, adapter: BenchAdapter) -> None:
        self._provider = provider
        self._adapter = adapter
        self._queues: dict[str, asyncio.Queue[InboundMessage]] = {}
        self._workers: list[asyncio.Task[None]] = []
        self._slots = asyncio.Semaphore(MAX_CONCURRENT)

    async def __call__(self, message: InboundMessage) -> None:
        queue = self._queues.get(message.chat_id)
        if queue is None:
            queue = self._queues[message.chat_id] = asyncio.Queue()
            self._workers.append(asyncio.create_task(self._work(queue)))
        queue.put_nowait(message)

    async def _work(self, queue: asyncio.Queue[InboundMessage]) -> None:
        while True:
            message = await queue.get()
            async with self._slots:
                request = ModelRequest(model=MODEL, system="You are a helpful assistant.", messages=[ChatMessage.user(message.text)])
                response = await self._provider.complete(request)
            await self._adapter.send(OutboundMessage(chat_id=message.chat_id, text=response.message.content))

    async def stop(self) -> None:
        for worker in self._workers:
            worker.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)


async def start_floor() -> System:
    tracker = Tracker()
    adapter = BenchAdapter(tracker)
    floor = QueueFloor(ZeroLatencyProvider(tracker), adapter)
    intake: Intake = floor
    await adapter.start(intake)

    async def check() -> None:
        return None

    return System("floor", adapter, tracker, floor.stop, check)
