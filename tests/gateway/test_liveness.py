"""The liveness monitor and catch-up, through the real Gateway: a quiet connection is probed, a deaf one
reconnected, and what it missed is fed through intake (answered once, or noted when too old).

The platform is a stand-in (tests/fakes/listening_adapter.py) that keeps every message users send and
can stop delivering them, the way Discord and Slack keep a channel's history whatever the socket did.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest
from structlog.testing import capture_logs

from adapters.contract import AccessPolicy, AdapterState, ChatType, Liveness
from config.liveness import LivenessConfig
from gateway.inbound.catch_up import missed_note
from gateway.operations.liveness import LivenessMonitor
from gateway.operations.metrics import Metrics
from tests.fakes.listening_adapter import ListeningAdapter
from tests.fakes.model_server import ModelServer
from tests.gateway.conftest import GatewayFactory, settled
from tests.waiting import eventually

QUICK = {"liveness": {"idle_probe_after": 1, "check_every": 0.1, "probe_timeout": 1}}
"""Probe after a second of quiet (the shortest the config takes), looking ten times a second."""
NO_PROBES = {"liveness": {"enabled": False}}


def sample(metrics: Metrics, line_start: str) -> float | None:
    """The value of the first /metrics sample line starting with ``line_start``."""
    for line in metrics.render().decode().splitlines():
        if line.startswith(line_start):
            return float(line.rsplit(" ", 1)[1])
    return None


def events(logs: list[dict], name: str) -> list[dict]:
    return [entry for entry in logs if entry["event"] == name]


def asked(server: ModelServer, text: str) -> int:
    """How many model requests ended with a user message holding ``text``."""
    return sum(text in str(request.body["messages"][-1]["content"]) for request in server.requests)


async def test_a_deaf_connection_is_probed_reconnected_and_what_it_missed_is_answered_once(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    adapter = ListeningAdapter()
    running = await start_gateway(QUICK, adapter=adapter)
    await adapter.say("hello")
    await settled(running.store)
    with capture_logs() as logs:
        adapter.deaf = True  # the socket stays up; the platform's events no longer reach it
        await adapter.say("are you still there?")
        await eventually(lambda: adapter.reconnects, "the deaf connection to be reconnected")
        await eventually(lambda: "ok: are you still there?" in adapter.texts(), "the missed message to be answered")
        await settled(running.store)
        await eventually(lambda: events(logs, "adapter.catchup"), "the catch-up to be logged")

    (failed, *_) = events(logs, "adapter.probe_failed")
    assert failed["platform"] == "loopback" and "newer than the last received" in failed["detail"]
    assert adapter.reconnects[0].startswith("liveness probe failed: ")
    (points, window), *_ = adapter.catch_ups
    assert [(p.chat_id, p.chat_type, p.after) for p in points] == [("chat-1", ChatType.DM, adapter.history[0].message_id)]
    assert window.since >= adapter.history[0].timestamp - 1  # never before the last message stored
    first = events(logs, "adapter.catchup")[0]
    assert (first["found"], first["new"], first["old"]) == (1, 1, 0)
    assert adapter.texts().count("ok: are you still there?") == 1
    assert asked(model_server, "are you still there?") == 1
    metrics = running.gateway.metrics
    assert (sample(metrics, 'switchboard_liveness_probes_total{platform="loopback",result="failed"}') or 0) >= 1
    assert (sample(metrics, 'switchboard_adapter_reconnects_total{platform="loopback"}') or 0) >= 1
    assert sample(metrics, 'switchboard_catchup_messages_total{kind="new",platform="loopback"}') == 1


async def test_a_catch_up_drops_what_the_gateway_already_has(start_gateway: GatewayFactory, model_server: ModelServer) -> None:
    adapter = ListeningAdapter()
    adapter.ignore_after = True  # the platform returns the whole window, what was delivered live included
    running = await start_gateway(NO_PROBES, adapter=adapter)
    await adapter.say("first")
    await settled(running.store)
    adapter.deaf = True
    await adapter.say("lost in the gap")
    with capture_logs() as logs:
        adapter._report_gap("a new session instead of a resumed one")
        await eventually(lambda: events(logs, "adapter.catchup"), "the catch-up to be logged")
        await settled(running.store)

    (logged,) = events(logs, "adapter.catchup")
    assert (logged["found"], logged["new"], logged["old"]) == (2, 1, 0)
    assert adapter.texts() == ["ok: first", "ok: lost in the gap"]
    assert asked(model_server, "first") == 1


@pytest.mark.parametrize("old_messages", ["note", "skip"])
async def test_messages_too_old_to_answer_are_stored_and_their_chat_gets_one_note_or_nothing(
    start_gateway: GatewayFactory, model_server: ModelServer, old_messages: str
) -> None:
    adapter = ListeningAdapter()
    running = await start_gateway({**NO_PROBES, "catch_up": {"answer_within_minutes": 30, "old_messages": old_messages}},
                                  adapter=adapter)  # fmt: skip
    now = time.time()
    await adapter.say("good morning", sent_at=now - 3 * 3600)
    await settled(running.store)
    adapter.deaf = True
    await adapter.say("what is the capital of Peru?", sent_at=now - 2 * 3600)
    await adapter.say("never mind that", sent_at=now - 3600)
    await adapter.say("and how tall is Everest?", sent_at=now - 60)
    await adapter.say("stale in another chat", chat_id="chat-2", sent_at=now - 3600)  # no session there: not read
    with capture_logs() as logs:
        adapter._report_gap("a new session instead of a resumed one")
        await eventually(lambda: events(logs, "adapter.catchup"), "the catch-up to be logged")
        await settled(running.store)

    (logged,) = events(logs, "adapter.catchup")
    assert (logged["found"], logged["new"], logged["old"]) == (3, 3, 2)
    note = [missed_note(2)] if old_messages == "note" else []
    assert adapter.texts() == ["ok: good morning", *note, "ok: and how tall is Everest?"]
    assert asked(model_server, "capital of Peru") == asked(model_server, "never mind") == 0
    assert asked(model_server, "how tall is Everest") == 1
    assert sample(running.gateway.metrics, 'switchboard_inbound_settled_total{outcome="too_old",platform="loopback"}') == 2
    # Reported again: nothing new, nothing said twice.
    with capture_logs() as logs:
        adapter._report_gap("another new session")
        await eventually(lambda: events(logs, "adapter.catchup"), "the second catch-up to be logged")
    assert len(adapter.texts()) == 2 + len(note)


async def test_an_old_message_from_someone_the_bot_does_not_answer_is_ignored_and_not_noted(
    start_gateway: GatewayFactory,
) -> None:
    adapter = ListeningAdapter()
    policy = AccessPolicy(allowed_users=frozenset({"user-1"}), require_mention=False)
    running = await start_gateway(NO_PROBES, adapter=adapter, policy=policy)
    now = time.time()
    await adapter.say("hello all", chat_id="room", chat_type=ChatType.GROUP, sent_at=now - 3 * 3600)
    await settled(running.store)
    adapter.deaf = True
    await adapter.say("let me in", chat_id="room", chat_type=ChatType.GROUP, user_id="stranger", sent_at=now - 3600)
    with capture_logs() as logs:
        adapter._report_gap("a new session instead of a resumed one")
        await eventually(lambda: events(logs, "adapter.catchup"), "the catch-up to be logged")
        await settled(running.store)

    (logged,) = events(logs, "adapter.catchup")
    assert (logged["found"], logged["new"], logged["old"]) == (1, 1, 1)
    assert len(adapter.texts()) == 1  # the answer to "hello all"; no note: the stranger would not have been answered anyway
    assert [e["reason"] for e in events(logs, "inbound.ignored")] == ["user stranger is not allowed"]


async def test_a_catch_up_the_platform_fails_is_logged_and_the_next_gap_tries_again(start_gateway: GatewayFactory) -> None:
    adapter = ListeningAdapter()
    running = await start_gateway(NO_PROBES, adapter=adapter)
    await adapter.say("hello")
    await settled(running.store)
    adapter.deaf = True
    await adapter.say("missed once")
    adapter.catch_up_error = RuntimeError("503 Service Unavailable")
    with capture_logs() as logs:
        adapter._report_gap("first gap")
        await eventually(lambda: events(logs, "adapter.catchup_failed"), "the failed catch-up to be logged")
        adapter._report_gap("second gap")
        await eventually(lambda: "ok: missed once" in adapter.texts(), "the missed message to be answered")
    assert "503 Service Unavailable" in events(logs, "adapter.catchup_failed")[0]["error"]


async def test_a_gap_reported_during_a_catch_up_queues_one_more_run(start_gateway: GatewayFactory) -> None:
    adapter = ListeningAdapter()
    running = await start_gateway(NO_PROBES, adapter=adapter)
    await adapter.say("hello")
    await settled(running.store)
    adapter.catch_up_gate = gate = asyncio.Event()
    adapter._report_gap("first gap")
    await eventually(lambda: len(adapter.catch_ups) == 1, "the first catch-up to ask the platform")
    adapter._report_gap("second gap")
    adapter._report_gap("third gap")
    gate.set()
    await eventually(lambda: not running.gateway.catch_up.running("loopback"), "the catch-ups to end")
    assert len(adapter.catch_ups) == 2


async def test_a_probe_that_does_not_answer_failed_and_a_reconnect_refused_is_logged(
    start_gateway: GatewayFactory,
) -> None:
    adapter = ListeningAdapter()
    adapter.probe_hangs = True
    adapter.can_reconnect = False
    with capture_logs() as logs:
        running = await start_gateway(QUICK, adapter=adapter)
        await eventually(lambda: events(logs, "adapter.reconnect_failed"), "the refused reconnect to be logged")

    (failed, *_) = events(logs, "adapter.probe_failed")
    assert failed["detail"] == "the probe got no answer within 1 s"
    assert "cannot reconnect" in events(logs, "adapter.reconnect_failed")[0]["error"]
    health = await running.gateway.snapshot()
    probe = health["adapters"]["loopback"]["probe"]
    assert probe["ok"] is False and probe["detail"] == "the probe got no answer within 1 s" and probe["at"] > 0
    assert sample(running.gateway.metrics, 'switchboard_liveness_probe_ok{platform="loopback"}') == 0.0
    assert (sample(running.gateway.metrics, 'switchboard_liveness_probe_timestamp_seconds{platform="loopback"}') or 0) > 0


async def test_health_and_metrics_show_the_last_probe_and_how_long_each_listed_chat_was_quiet(
    start_gateway: GatewayFactory,
) -> None:
    adapter = ListeningAdapter()
    adapter.probe_result = Liveness(True, "history holds nothing unseen", latency=0.25)
    policy = AccessPolicy(allow_all=True, allowed_chats=frozenset({"chat-1", "chat-2"}))
    running = await start_gateway(QUICK, adapter=adapter, policy=policy)
    await adapter.say("hello", chat_id="chat-1", chat_type=ChatType.GROUP, mentioned=True)
    await settled(running.store)
    await eventually(lambda: adapter.probed, "the quiet connection to be probed")

    async with aiohttp.ClientSession() as http:
        assert running.gateway.health_url is not None
        async with http.get(running.gateway.health_url) as response:
            health = await response.json()
        async with http.get(running.gateway.health_url.replace("/health", "/metrics")) as response:
            page = await response.text()
    entry = health["adapters"]["loopback"]
    await eventually(lambda: running.gateway.liveness.last_probe("loopback"), "the probe to be recorded")
    assert set(entry["chats"]) == {"chat-1", "chat-2"}
    assert entry["chats"]["chat-1"] <= entry["chats"]["chat-2"]  # chat-2 never spoke: counted from the start
    assert entry["seconds_since_inbound"] is not None
    if entry["probe"] is not None:  # the page may have been read before the first probe ended
        assert entry["probe"]["ok"] is True and entry["probe"]["latency"] == 0.25
    for line in (
        'switchboard_adapter_state{platform="loopback",state="running"} 1.0',
        'switchboard_adapter_state{platform="loopback",state="degraded"} 0.0',
        'switchboard_adapter_seconds_since_inbound{platform="loopback"} ',
        'switchboard_chat_seconds_since_inbound{chat="chat-1",platform="loopback"} ',
        'switchboard_chat_seconds_since_inbound{chat="chat-2",platform="loopback"} ',
    ):
        assert line in page, line
    assert sample(running.gateway.metrics, 'switchboard_liveness_probe_ok{platform="loopback"}') == 1.0


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


async def test_only_a_quiet_adapter_that_claims_to_be_up_is_probed_and_not_again_until_quiet_as_long() -> None:
    clock = Clock()
    quiet, busy, struggling = ListeningAdapter(), ListeningAdapter(), ListeningAdapter()
    for adapter, name in ((quiet, "quiet"), (busy, "busy"), (struggling, "struggling")):
        adapter.platform = name  # type: ignore[misc] - three platforms for one monitor
        adapter._set_state(AdapterState.RUNNING)
    struggling._set_state(AdapterState.DEGRADED, "polling stalled")  # its own supervision is at it already
    quiet.probe_result = Liveness(False, "deaf")
    quiet.hold_reconnect = True
    requests: list[tuple[str, str]] = []

    async def no_points(platform: str, limit: int) -> list:
        return []

    monitor = LivenessMonitor(
        [quiet, busy, struggling], LivenessConfig(idle_probe_after=600), Metrics(), points=no_points,
        catch_up=lambda platform, reason: requests.append((platform, reason)), watched_chats={}, clock=clock,
    )  # fmt: skip
    clock.now += 601
    busy._last_inbound_at = clock.now - 5  # heard from five seconds ago
    await monitor.check()
    assert (len(quiet.probed), len(busy.probed), len(struggling.probed)) == (1, 0, 0)
    assert quiet.status().state is AdapterState.DEGRADED  # asked to reconnect, held there by the test
    clock.now += 300
    await monitor.check()
    assert len(quiet.probed) == 1  # probed five minutes ago: not yet again
    clock.now += 301
    await monitor.check()
    assert len(quiet.probed) == 2  # degraded by our own failed probe: still probed
    assert len(quiet.reconnects) == 2 and not requests
    quiet.connected_again()
    await monitor.check()
    assert requests == [("quiet", "reconnected after a failed liveness probe")]


class SlowProbe(ListeningAdapter):
    """A stand-in whose probe takes ``seconds`` on ``clock`` (Discord's gives a suspect message a grace first)."""

    def __init__(self, clock: Clock, seconds: float) -> None:
        super().__init__()
        self._clock, self._seconds = clock, seconds

    async def probe_liveness(self, points):  # type: ignore[no-untyped-def] - as the parent's
        self._clock.now += self._seconds
        return await super().probe_liveness(points)


async def test_a_probe_slower_than_the_quiet_period_does_not_tear_down_the_reconnect_it_asked_for() -> None:
    clock = Clock()
    adapter = SlowProbe(clock, seconds=5)
    adapter._set_state(AdapterState.RUNNING)
    adapter.probe_result = Liveness(False, "deaf")
    adapter.hold_reconnect = True  # the new connection takes a while

    async def no_points(platform: str, limit: int) -> list:
        return []

    monitor = LivenessMonitor([adapter], LivenessConfig(idle_probe_after=3), Metrics(), points=no_points,
                              catch_up=lambda platform, reason: None, watched_chats={}, clock=clock)  # fmt: skip
    clock.now += 3
    await monitor.check()
    assert (len(adapter.probed), len(adapter.reconnects)) == (1, 1)
    await monitor.check()  # the next look, a moment after the probe ended
    assert (len(adapter.probed), len(adapter.reconnects)) == (1, 1)  # the reconnect just asked for is left to run
    clock.now += 3
    await monitor.check()
    assert (len(adapter.probed), len(adapter.reconnects)) == (2, 2)  # quiet as long again: probed again
