"""Slack losing events, end to end: the real Gateway with the real SlackAdapter (slack-bolt, Socket Mode)
against the fake Slack. A deaf socket is found by the liveness probe, reconnected and caught up; a socket
Slack drops, losing the events in between, is caught up after the new ``hello``. Each missed message, in a
DM and in a thread, is answered once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest_asyncio
from structlog.testing import capture_logs

from config import load_config
from config.plan import build_plan
from gateway.adapter_loader import load_adapters
from gateway.agent_factory import build_agent
from gateway.app import Gateway
from gateway.runner import search_function
from storage import Store
from tests.adapters.slack.conftest import ALICE, CHANNEL, DM, RunningSlack, ago, slack_section
from tests.fakes.model_server import ModelServer, Text
from tests.fakes.slack_api import BOT_USER_ID, FakeSlack, mention, message
from tests.gateway.conftest import settled, spoken, write_config
from tests.waiting import eventually

QUICK = {"liveness": {"idle_probe_after": 1, "check_every": 0.1, "probe_timeout": 10}}
NO_PROBES = {"liveness": {"enabled": False}}

StartSlack = Callable[[dict[str, Any]], Awaitable[RunningSlack]]


@pytest_asyncio.fixture
async def start_socket(model_server: ModelServer, fake_slack: FakeSlack, tmp_path: Path) -> AsyncIterator[StartSlack]:
    """The gateway with Slack in Socket Mode and ``overrides`` in its config; shut down at the end."""
    started: list[Gateway] = []
    model_server.responder = lambda record: Text(f"ok: {spoken(record.last_user_text)[:40]}")

    async def start(overrides: dict[str, Any]) -> RunningSlack:
        home = tmp_path / "home"
        path = write_config(home, model_server, {"platforms": {"slack": slack_section(fake_slack, "socket")}, **overrides})
        loaded = load_config(path, {"SWITCHBOARD_HOME": str(home)}, create_home=True)
        adapters = load_adapters(build_plan(loaded).enabled, loaded)
        store = await Store.open(loaded.db_path)
        gateway = Gateway(loaded, store, adapters, build_agent(loaded, search=search_function(store)))
        started.append(gateway)
        assert await gateway.start() == 1, adapters[0].status()
        await fake_slack.wait_connections(1)
        return RunningSlack(gateway, adapters[0], store, fake_slack)

    yield start
    for gateway in started:
        await gateway.shutdown()


def events(logs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [entry for entry in logs if entry["event"] == name]


def asked(server: ModelServer, text: str) -> int:
    """How many model requests ended with a user message holding ``text``."""
    return sum(text in str(request.body["messages"][-1]["content"]) for request in server.requests)


async def a_dm_and_a_thread(slack: RunningSlack) -> str:
    """Alice talks to the bot in a DM and in a channel thread (both answered); returns the thread's ts.
    Dated two minutes back, so what she sends later is newer and counts as missed at once (not in flight)."""
    for payload in (message(DM, ALICE, "good morning", ts=ago(120)),
                    root := mention(CHANNEL, ALICE, f"<@{BOT_USER_ID}> a question for the channel", ts=ago(120))):  # fmt: skip
        await slack.api.wait_acked(await slack.api.say(payload))
    await settled(slack.store)
    assert slack.api.screen(DM) == ["ok: good morning"]
    assert slack.api.screen(CHANNEL) == ["ok: a question for the channel"]
    return str(root["event"]["ts"])


def missed_pair(thread: str) -> list[dict[str, Any]]:
    """A DM and a reply in the thread, sent while the bot heard nothing."""
    return [message(DM, ALICE, "did you get this one?", ts=ago(30)),
            message(CHANNEL, ALICE, "and this reply in the thread?", channel_type="channel", thread_ts=thread,
                    ts=ago(30))]  # fmt: skip


async def answered_once_each(slack: RunningSlack, model_server: ModelServer, thread: str) -> None:
    await eventually(lambda: len(slack.api.screen(DM)) == 2 and len(slack.api.screen(CHANNEL)) == 2,
                     "both missed messages to be answered")  # fmt: skip
    await settled(slack.store)
    assert slack.api.screen(DM) == ["ok: good morning", "ok: did you get this one?"]
    assert slack.api.screen(CHANNEL) == ["ok: a question for the channel", "ok: and this reply in the thread?"]
    assert {post.thread_ts for post in slack.api.posts if post.channel == CHANNEL} == {thread}  # in the thread
    for text in ("good morning", "a question for the channel", "did you get this one?", "and this reply in the thread?"):
        assert asked(model_server, text) == 1, text


async def test_a_deaf_socket_is_probed_reconnected_and_the_dm_and_thread_it_missed_are_answered_once(
    start_socket: StartSlack, model_server: ModelServer
) -> None:
    slack = await start_socket(QUICK)
    thread = await a_dm_and_a_thread(slack)
    with capture_logs() as logs:
        slack.api.deaf = True  # the socket stays up, its pings answered; Slack sends no events
        for payload in missed_pair(thread):
            await slack.api.say(payload)
        assert len(slack.api.dropped) == 2
        await eventually(lambda: slack.api.connections >= 2, "the deaf socket to be replaced")
        slack.api.deaf = False  # the new session hears again
        await answered_once_each(slack, model_server, thread)
        await eventually(lambda: events(logs, "adapter.catchup"), "the catch-up to be logged")

    (failed, *_) = events(logs, "adapter.probe_failed")
    assert failed["platform"] == "slack" and failed["missed"] is True
    assert (f"DM {DM}" in failed["detail"] or f"thread {thread}" in failed["detail"]) and "never arrived" in failed["detail"]
    (reconnect, *_) = events(logs, "slack.reconnect")
    assert reconnect["reason"].startswith("liveness probe failed: ")  # the adapter was degraded with that reason
    catchups = events(logs, "adapter.catchup")
    assert sum(line["new"] for line in catchups) == 2 and all(line["old"] == 0 for line in catchups), catchups
    assert slack.adapter.status().state.value == "running"
    probe = (await slack.gateway.snapshot())["adapters"]["slack"]["probe"]
    assert probe is not None and probe["at"] > 0  # the last probe, ok or not, is shown


async def test_slack_dropping_the_socket_and_the_events_in_between_is_caught_up_after_the_new_hello(
    start_socket: StartSlack, model_server: ModelServer
) -> None:
    slack = await start_socket(NO_PROBES)
    thread = await a_dm_and_a_thread(slack)
    with capture_logs() as logs:
        await slack.api.reconnect(lost=missed_pair(thread))  # a refresh: the events posted meanwhile never come
        await answered_once_each(slack, model_server, thread)
        await eventually(lambda: events(logs, "adapter.catchup"), "the catch-up to be logged")

    (gap,) = events(logs, "adapter.gap")
    assert gap["platform"] == "slack" and "new session" in gap["reason"]
    (catchup,) = events(logs, "adapter.catchup")
    assert (catchup["platform"], catchup["points"], catchup["found"], catchup["new"], catchup["old"]) == ("slack", 2, 2, 2, 0)
    assert not events(logs, "adapter.probe_failed")  # the gap alone led to it
