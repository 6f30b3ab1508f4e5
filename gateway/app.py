"""The gateway process: adapters in, storage underneath, the agent behind, /health beside.

:class:`Gateway` wires the parts together and owns the order in which they
start and stop.

Start: build the agent; start the tool servers (``gateway/tools/mcp``: one that fails is logged and
left out, and tried again in the background); move aside the global memory files of earlier versions
(``gateway.turn.memory_scope.move_global_memory``); remember the inbox events a previous run left
unfinished; start the adapters (one failing never stops the others, but a port that is taken
stops the whole start), each told whom to report a gap in its connection to; send
what the outbox still holds; queue the unfinished events in arrival order (in cluster mode the
replica joins first, and its scan claims the conversations nobody works on instead:
``gateway/cluster/dispatch.py``); then let new messages through and start watching the connections for silence
(``gateway/operations/liveness.py``; a gap or a failed probe catches up: ``gateway/inbound/catch_up.py``).

Stop: stop the liveness monitor and any catch-up; stop intake on every adapter; let running turns finish within the
drain timeout (what does not finish is resumed on the next start, as are turns
that were waiting for a failing database: ``gateway/turn/retry.py``); flush the
outbox; stop the tool servers; close adapters, /health and storage.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import structlog

from adapters.contract import AccessPolicy, Adapter, AdapterState, InboundMessage
from adapters.http_listener import ListenError, ListenerLimits
from agent import Agent
from config.loader import LoadedConfig
from gateway.inbound.access import AccessControl
from gateway.inbound.catch_up import CatchUp
from gateway.cluster.connections import ConnectionLeases
from gateway.cluster.dispatch import SessionDispatch
from gateway.cluster.outbox_claims import pick_up_left_chunks
from gateway.cluster.replica import Replica
from gateway.cluster.status import ClusterHealth, config_fingerprint
from gateway.commands.handlers import CommandHandlers
from gateway.turn.conversations import Conversations
from gateway.operations.alerts import Alerts
from gateway.operations.database_health import DatabaseHealth
from gateway.store_setup import database_name
from gateway.delivery.budget import ChatBudget
from gateway.delivery.outbox import Delivery
from gateway.delivery.policy import DeliveryPolicy
from gateway.delivery.streaming import close_orphaned_streams
from gateway.operations.health import HealthServer
from gateway.operations.liveness import LivenessMonitor
from gateway.inbound.ledger import InboundLedger, Outcome
from gateway.inbound.intake import Intake
from gateway.inbound.lanes import Lanes
from gateway.media_setup import GatewayMedia
from gateway.turn.memory_scope import move_global_memory
from gateway.operations.metrics import Metrics
from gateway.inbound.pairing import Pairing
from gateway.turn.platform_hints import PlatformHints
from gateway.operations.redaction import redactor
from gateway.turn.attachments import MediaStep
from gateway.turn.slots import AgentSlots
from gateway.tasks import TaskTracker
from gateway.tools.access import ToolAccess
from gateway.tools.mcp import ToolServers
from gateway.turn.retry import TurnRetry, TurnRetryPolicy
from gateway.turn.runner import TurnRunner
from gateway.turn.running import RunningTurns
from gateway.tools.approval import Approvals
from gateway.operations.version import version
from storage import InboxRecord, StorageError, StorageEngine, cluster_of

log = structlog.get_logger("gateway")

HOUSEKEEPING_EVERY = 3600.0
KEEP_SETTLED = 7 * 24 * 3600.0
"""Finished inbox events (the redelivery window) and sent outbox chunks are kept a week."""


class Gateway:
    def __init__(
        self,
        loaded: LoadedConfig,
        store: StorageEngine,
        adapters: Sequence[Adapter],
        agent: Agent,
        *,
        extra_access: Mapping[str, AccessPolicy] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``clock``: the wall clock the session policies read (idle and daily resets, /status, /usage,
        pruning); tests pass a fake one, along with the store's (``Store.open(clock=...)``)."""
        settings = loaded.settings
        redactor.add_secrets(loaded.secrets())  # every exit (log, /health, replies) masks them from now on
        self._clock = clock
        self._loaded = loaded
        self._store = store
        self._adapters = list(adapters)
        self._by_platform = {adapter.platform: adapter for adapter in self._adapters}
        self._agent = agent
        self._tasks = TaskTracker()
        self.metrics = Metrics()
        self._health = HealthServer(self.snapshot, settings.health.host, settings.health.port, metrics=self.metrics,
                                    limits=ListenerLimits.from_config(settings.health))  # fmt: skip
        self._started_at = time.monotonic()
        self._stopping = False
        self._housekeeping: asyncio.Task[None] | None = None
        cluster = cluster_of(store) if settings.cluster.enabled else None
        self.replica = None if cluster is None else Replica(cluster, settings.cluster, self.metrics, version=version())
        """This gateway as one of several on the database (``cluster.enabled``), else None."""
        fence = self.replica.check if self.replica is not None else None
        self.connections = None if cluster is None else ConnectionLeases(cluster, self._adapters, self.metrics)
        """Cluster mode: which replica receives on each connection only one may hold (the rest only send)."""
        self._cluster = None if self.replica is None else ClusterHealth(
            self.replica, self.metrics, on_count=lambda alive: self.delivery.budget.share_with(alive)
        )  # each replica sends its share of every platform's overall rate
        if self.replica is not None:
            fingerprint = config_fingerprint(settings)
            self.replica.report("config", lambda: fingerprint)
        self.delivery = Delivery(
            store,
            self._by_platform,
            self.metrics,
            policy=DeliveryPolicy(keep_trying=settings.gateway.undelivered_keep_hours * 3600.0),
            budget=ChatBudget(self._by_platform, intervals={
                name: section.stream_edit_interval for name, section in settings.platforms.sections()
                if section.stream_edit_interval is not None
            }),
            may_send=self.replica.alive if self.replica is not None else lambda: True,
        )
        if self.replica is not None:
            pick_up_left_chunks(self.replica, self.delivery, self._tasks.spawn)
        hints = PlatformHints(self._by_platform, settings.agent.platform_hints)
        self.tool_access = ToolAccess(settings.tools, agent.tools)
        """Which tools a new session's person is offered (built-in ones always, a tool server's per its rules)."""
        self.conversations = Conversations(store, agent, settings.sessions, clock=clock, platform_hint=hints,
                                           tool_offer=self.tool_access)  # fmt: skip
        self._ledger = InboundLedger(store, self.delivery, self.metrics, fence=fence)
        running = RunningTurns()
        self.approvals = Approvals(self._by_platform, running, timeout=settings.tools.confirm_timeout,
                                   budget=self.delivery.budget)  # fmt: skip
        """Asks the person before a tool marked ``confirm`` runs (its ``confirm`` is what such a tool calls);
        every adapter's ``on_button`` goes to it."""
        self.tool_servers = ToolServers(settings.tools, agent.tools, home=loaded.home, confirm=self.approvals.confirm)
        """The MCP servers of ``tools.mcp_servers``: their tools join ``agent.tools`` as they start."""
        self.media = GatewayMedia(loaded)
        media_step = MediaStep(self.media.pipeline, adapters=self._by_platform, delivery=self.delivery,
                               ledger=self._ledger, conversations=self.conversations, metrics=self.metrics)  # fmt: skip
        runner = TurnRunner(
            store=store,
            conversations=self.conversations,
            delivery=self.delivery,
            ledger=self._ledger,
            adapters=self._by_platform,
            metrics=self.metrics,
            compression=settings.compression,
            context_length=agent.window.tokens,
            group_per_user=settings.sessions.group_per_user,
            slots=AgentSlots(settings.sessions.max_concurrent_turns, on_wait=self.metrics.lane_wait.observe),
            media=media_step,
            tool_progress=settings.gateway.tool_progress,
            streaming=settings.gateway.streaming != "off",
            fence=fence,
            running=running,
        )
        self.database = DatabaseHealth(database_name(loaded))
        retry_policy = TurnRetryPolicy(notice_after=settings.gateway.database_retry_notice_after,
                                       max_pause=settings.gateway.database_retry_max_delay)  # fmt: skip
        self._retry = TurnRetry(runner.run, store=store, delivery=self.delivery, ledger=self._ledger,
                                health=self.database, metrics=self.metrics, policy=retry_policy)  # fmt: skip
        self.alerts = Alerts(loaded, store=store, delivery=self.delivery, adapters=self._adapters, metrics=self.metrics,
                             database=self.database, spawn=self._tasks.spawn, clock=clock)  # fmt: skip
        self.lanes: Lanes[InboundMessage] = Lanes(
            self._retry,
            self._tasks,
            debounce=settings.sessions.debounce_ms / 1000,
            busy=settings.sessions.busy,
            on_cancelled=self._turn_stopped,
            on_wait=self.metrics.queue_wait.observe,
            linger=album_linger(settings.media.album_wait_ms / 1000),
        )
        # Read when /metrics is scraped, not recomputed on every message.
        self.metrics.queue_depth.set_function(self.lanes.queued)
        access = access_for(loaded, self._adapters)
        access.policies.update(extra_access or {})
        pairing = Pairing(store)
        commands = CommandHandlers(
            store=store, conversations=self.conversations, lanes=self.lanes, access=access, pairing=pairing,
            memories=agent.memories, clock=clock,
        )  # fmt: skip
        self.intake = Intake(
            store=store, access=access, pairing=pairing, lanes=self.lanes, commands=commands, delivery=self.delivery,
            ledger=self._ledger, tracker=self._tasks, metrics=self.metrics,
            group_per_user=settings.sessions.group_per_user, bot_username=self._bot_username,
            heard=lambda message: self.liveness.heard(message),  # the monitor is made below: it needs intake
        )  # fmt: skip
        self.dispatch: SessionDispatch | None = None
        if self.replica is not None:  # the replica holding a session's claim routes its messages
            self.dispatch = SessionDispatch(self.replica, intake=self.intake, lanes=self.lanes,
                                            conversations=self.conversations, ledger=self._ledger, delivery=self.delivery,
                                            tracker=self._tasks, metrics=self.metrics)  # fmt: skip
            self.dispatch.attach()
        self.catch_up = CatchUp(
            store=store, adapters=self._by_platform, intake=self.intake, ledger=self._ledger, delivery=self.delivery,
            metrics=self.metrics, settings=settings.catch_up, clock=time.time,
        )  # fmt: skip
        self.liveness = LivenessMonitor(
            self._adapters, settings.liveness, self.metrics, points=self.catch_up.points, catch_up=self.catch_up.request,
            watched_chats={platform: policy.allowed_chats for platform, policy in access.policies.items()},
        )  # fmt: skip

    async def _turn_stopped(self, lane: str, batch: list[InboundMessage]) -> None:
        """A turn stopped by the user (or interrupted by a newer message) counts as answered."""
        try:
            await self._ledger.settle(batch, Outcome.STOPPED)
        except StorageError as error:  # a failing database (a stopped turn may have been waiting for it)
            log.warning("turn.stopped_unrecorded", session_key=lane, error=str(error),
                        hint="the stopped message is answered on the next start")  # fmt: skip
        log.info("turn.stopped", session_key=lane, messages=len(batch))

    @property
    def health_url(self) -> str | None:
        return self._health.url

    @property
    def adapters(self) -> list[Adapter]:
        return list(self._adapters)

    @property
    def agent(self) -> Agent:
        """The agent the turns run (its ``tools`` registry is where a tool server's tools join)."""
        return self._agent

    async def start(self) -> int:
        """Start everything; returns how many adapters run. Raises ListenError when /health or a platform's
        endpoint cannot listen (the caller shuts down what started)."""
        await asyncio.to_thread(move_global_memory, self._agent.memories.root, self._clock)
        await self._health.start()
        await self.tool_servers.start()  # before any message can start a turn that would offer their tools
        if self.replica is not None:
            await self.replica.start()  # first: what the store claims from here on is this incarnation's
        unfinished = await self._store.inbox_unfinished()
        started = [adapter for adapter in self._adapters if await self._start_adapter(adapter)]
        running = len(started)
        # Streamed messages a crash left whose turn will not run again end with the interrupted mark
        # (their turns that do run again take their messages over): pending edits, sent just below.
        await close_orphaned_streams(self._store, self._by_platform,
                                     {(r.platform, r.event_id) for r in unfinished})  # fmt: skip
        # Old chunks go out in the background, each chat on its own (a platform that is down holds
        # up nobody else); every chat's lock is held first, so a new reply queues behind them.
        await self.delivery.resume(spawn=self._tasks.spawn)
        replayed = 0
        if self.dispatch is None:  # in a cluster, the scan claims the sessions nobody works on (another may)
            replayed = await self.intake.replay(await self._replayable(unfinished))
        self.intake.open()
        if self.replica is not None and self.connections is not None:
            await self.connections.start(self.replica)
        self.liveness.start()
        for adapter in started:  # what was sent while the gateway was stopped, where the platform did not keep it
            self.catch_up.request_when_running(adapter.platform, "the gateway started")
        self.alerts.start()
        self._housekeeping = asyncio.create_task(self._keep_house(), name="housekeeping")
        log.info(
            "gateway.started", version=version(), adapters=running, of=len(self._adapters),
            model=self._agent.router.primary.model, context=self._agent.window.tokens, replayed=replayed,
            loop=type(asyncio.get_running_loop()).__module__.split(".")[0],
        )  # fmt: skip
        return running

    async def _replayable(self, unfinished: Sequence[InboxRecord]) -> list[InboundMessage]:
        """The inbox rows left over from before the restart, as messages; a row that no longer reads as one
        (stored by an older version that let a wrong type through) is logged, marked done and left out,
        so it cannot stop every start."""
        messages = [await self._ledger.read_back(record) for record in unfinished]
        return [message for message in messages if message is not None]

    async def _start_adapter(self, adapter: Adapter) -> bool:
        adapter.on_gap = partial(self.liveness.gap, adapter.platform)
        adapter.on_button = self.approvals.on_button
        try:
            if self.connections is not None and self.connections.owned(adapter):
                await adapter.start(self.intake, receive=False)  # it receives while this replica holds the lease
            else:
                await adapter.start(self.intake)
        except ListenError:
            raise  # a port that is taken is the configuration's fault: the whole start stops (exit status 2)
        except Exception as error:  # noqa: BLE001 - one platform's failure must not stop the others
            log.error("adapter.start_failed", platform=adapter.platform, error=str(error), exc_info=error)
            return False
        log.info("adapter.started", platform=adapter.platform, detail=adapter.status().detail)
        return True

    async def _keep_house(self) -> None:
        """Every ``gateway.undelivered_retry_every`` seconds, try again the chats whose replies could
        not be delivered (an outage); at start and once an hour, forget settled inbox and outbox rows
        older than a week and the media files older than ``media.retention_days``."""
        pruned_at: float | None = None
        while True:
            await self._quietly(self.delivery.retry_stalled(spawn=self._tasks.spawn), "delivery.retry_failed", "all")
            if pruned_at is None or time.monotonic() - pruned_at >= HOUSEKEEPING_EVERY:
                pruned_at = time.monotonic()
                await self._prune()
            await asyncio.sleep(self._loaded.settings.gateway.undelivered_retry_every)

    async def _prune(self) -> None:
        await self.media.prune()
        cutoff = self._clock() - KEEP_SETTLED
        try:
            inbox = await self._store.inbox_prune(cutoff)
            outbox = await self._store.outbox_prune(cutoff)
            if inbox or outbox:
                log.info("housekeeping.pruned", inbox=inbox, outbox=outbox)
        except Exception as error:  # noqa: BLE001 - pruning is best effort; it runs again later
            log.warning("housekeeping.failed", error=str(error))

    def _bot_username(self, platform: str) -> str | None:
        adapter = self._by_platform.get(platform)
        return adapter.bot_username if adapter is not None else None

    async def snapshot(self) -> dict[str, Any]:
        """The /health body."""
        now = time.time()
        adapters = {
            adapter.platform: adapter.status().to_dict(now) | self.liveness.health(adapter.platform, now)
            for adapter in self._adapters
        }
        database = self.database.to_dict(await self._probe_database())
        cluster = await self._cluster.entry() if self._cluster is not None else None  # absent without cluster mode
        running = [a for a in adapters.values() if a["state"] == AdapterState.RUNNING.value]
        healthy = database["ok"] and not self._stopping and len(running) == len(adapters) and bool(adapters)
        healthy = healthy and not (cluster is not None and cluster["expired"])
        return {
            "status": "stopping" if self._stopping else ("ok" if healthy else "degraded"),
            "version": version(),
            "uptime_s": round(time.monotonic() - self._started_at, 1),
            "adapters": adapters,
            "database": database,
            "queue_depth": self.lanes.queued(),
            "turns_running": self.lanes.running(),
        } | ({"cluster": cluster} if cluster is not None else {}) | (
            {"tool_servers": self.tool_servers.health()} if self.tool_servers.supervisors else {}
        )

    async def _probe_database(self) -> BaseException | None:
        """What reading the database's tables raised just now (None: it answered)."""
        try:
            await asyncio.wait_for(self._store.probe(), timeout=2.0)
        except Exception as error:  # noqa: BLE001 - /health reports the failure instead of raising
            return error
        return None

    async def shutdown(self) -> None:
        """Stop intake, drain running turns, flush the outbox, close adapters, /health and storage."""
        if self._stopping:
            return
        self._stopping = True
        self._retry.stop()  # turns waiting for the database are answered on the next start
        if self.dispatch is not None:
            self.dispatch.close()
        drain_timeout = self._loaded.settings.gateway.drain_timeout
        log.info("shutdown.begin", turns_running=self.lanes.running(), queued=self.lanes.queued(),
                 drain_timeout=drain_timeout)  # fmt: skip
        if self._housekeeping is not None:
            self._housekeeping.cancel()
            await asyncio.gather(self._housekeeping, return_exceptions=True)
        await self.liveness.stop()
        await self.catch_up.close()
        if self.connections is not None:  # first, so another replica takes them over at once
            await self._quietly(self.connections.stop(), "cluster.leases_release_failed", "all")
        for adapter in self._adapters:
            await self._quietly(adapter.stop_intake(), "adapter.stop_intake_failed", adapter.platform)
        drained = await self._tasks.drain(drain_timeout)
        if drained.cancelled:
            log.warning("shutdown.drain_timeout", finished=drained.finished, cancelled=drained.cancelled,
                        hint="unfinished turns resume on the next start")  # fmt: skip
        await self._quietly(self._flush(drain_timeout), "shutdown.flush_failed", "all")
        await self._quietly(self.tool_servers.stop(), "mcp.stop_failed", "all")
        if self.replica is not None:  # what is left unsent falls free for the other replicas at once
            await self._quietly(self.replica.stop(), "cluster.stop_failed", "all")
        await self._quietly(self.alerts.stop(), "alerts.stop_failed", "all")
        for adapter in self._adapters:
            await self._quietly(adapter.close(), "adapter.close_failed", adapter.platform)
        await self._health.stop()
        await self._quietly(self.media.aclose(), "media.close_failed", "all")
        await self._agent.aclose()
        await self._store.close()
        log.info("shutdown.done", finished=drained.finished, cancelled=drained.cancelled)

    async def _flush(self, timeout: float) -> None:
        """Send what the outbox still holds, for at most ``timeout`` seconds (the rest goes on the next start)."""
        try:
            async with asyncio.timeout(timeout):
                await self.delivery.resume()
        except TimeoutError:
            log.warning("shutdown.flush_timeout", timeout_s=timeout, hint="undelivered chunks are sent on the next start")

    @staticmethod
    async def _quietly(step: Any, event: str, platform: str) -> None:
        try:
            await step
        except Exception as error:  # noqa: BLE001 - shutdown continues past a failing part
            log.error(event, platform=platform, error=str(error), exc_info=error)


def album_linger(wait: float) -> Callable[[InboundMessage], float]:
    """How long a lane waits, quiet, for the rest of an album once one of its messages arrived."""
    return lambda message: wait if message.group_id else 0.0


def access_for(loaded: LoadedConfig, adapters: Sequence[Adapter]) -> AccessControl:
    """Who may talk to the bot on each platform: each adapter reads its own config section."""
    policies: dict[str, AccessPolicy] = {}
    for adapter in adapters:
        section = loaded.settings.platforms.section(adapter.platform)
        if section is not None:
            policies[adapter.platform] = type(adapter).access_policy(section)
    return AccessControl(policies)
