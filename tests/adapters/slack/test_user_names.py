"""Sender names from users.info: what the model and /whoami see, and how the cache spares Slack.

The first tests run the real gateway with the real adapter (slack-bolt) against
the fake Slack and read the name where it ends up: in the model request (a
channel thread is a shared session, so the gateway starts each message with
"NAME: "; a group chat session of one person gets "[This message comes from
NAME in a group chat.]") and in the /whoami answer. The rest drive :class:`UserNames` on its own against
the fake Web API, with a hand-turned clock.
"""

from __future__ import annotations

import asyncio
import re

import pytest
from slack_sdk.web.async_client import AsyncWebClient
from structlog.testing import capture_logs

from adapters.slack.users import FAILURE_TTL, NAME_TTL, UserNames, pick_name
from tests.adapters.slack.conftest import ALICE, BOB, CHANNEL, DM, Clock, SlackFactory
from tests.adapters.slack.test_threads import deliver, start
from tests.fakes.model_server import ModelServer
from tests.fakes.slack_api import BOT_USER_ID, FakeSlack, mention, message
from tests.waiting import eventually

SPEAKER_NOTE = re.compile(r"\[This message comes from (.*?) in a group chat\.\]")
NAMED_TEXT = re.compile(r"([^:\n]+): ")


def speakers(model_server: ModelServer) -> list[str]:
    """Who the gateway told the model was speaking, one entry per model request."""
    found = []
    for record in model_server.requests:
        notes = SPEAKER_NOTE.findall(str(record.messages))
        named = NAMED_TEXT.match(record.last_user_text)
        assert notes or named, f"the request does not say who speaks: {record.messages}"
        found.append(notes[-1] if notes else named.group(1))  # type: ignore[union-attr]
    return found


def add_alice(api: FakeSlack) -> None:
    api.users.add(ALICE, "alice", real_name="Alice Anderson", display_name="Ally")


@pytest.mark.parametrize("mode", ["http", "socket"])
async def test_the_model_sees_the_display_name_and_slack_is_asked_once_per_user(
    start_slack: SlackFactory, model_server: ModelServer, fake_slack: FakeSlack, mode: str
) -> None:
    add_alice(fake_slack)
    fake_slack.users.add(BOB, "bob", real_name="Bob Brown")  # no display name: the real name is next
    slack = await start(start_slack, mode)
    await deliver(slack, mention(CHANNEL, ALICE, f"<@{BOT_USER_ID}> first"))
    await fake_slack.wait_posts(1)
    await deliver(slack, mention(CHANNEL, ALICE, f"<@{BOT_USER_ID}> second"))
    await fake_slack.wait_posts(2)
    await deliver(slack, mention(CHANNEL, BOB, f"<@{BOT_USER_ID}> third"))
    await fake_slack.wait_posts(3)
    assert speakers(model_server) == ["Ally", "Ally", "Bob Brown"]
    asked = [call.args.get("user") for call in fake_slack.calls_to("users.info")]
    assert asked == [ALICE, BOB], "one users.info call per user, the second message of Alice came from the cache"


async def test_whoami_in_a_dm_shows_the_name(start_slack: SlackFactory, fake_slack: FakeSlack) -> None:
    add_alice(fake_slack)
    slack = await start_slack("http")
    await deliver(slack, message(DM, ALICE, "/whoami"))
    [post] = await fake_slack.wait_posts(1)
    assert "Name: Ally" in post.text and ALICE in post.text


async def test_without_the_users_read_scope_messages_are_still_answered_under_the_raw_id(
    start_slack: SlackFactory, model_server: ModelServer, fake_slack: FakeSlack
) -> None:
    add_alice(fake_slack)
    fake_slack.users.scope_granted = False
    slack = await start_slack("http")
    await deliver(slack, mention(CHANNEL, ALICE, f"<@{BOT_USER_ID}> who am I to you?"))
    await deliver(slack, mention(CHANNEL, ALICE, f"<@{BOT_USER_ID}> still there?"))
    posts = await fake_slack.wait_posts(2)
    assert [p.text.split(":")[0] for p in posts] == ["ok", "ok"]
    assert speakers(model_server) == [ALICE, ALICE]
    assert len(fake_slack.calls_to("users.info")) == 1, "the failure is cached, not asked again for every message"


# --- UserNames on its own -------------------------------------------------------------------



def test_display_name_comes_first_then_real_name_then_account_name() -> None:
    profile = {"display_name": "Ally", "real_name": "Alice Anderson"}
    assert pick_name({"name": "alice", "profile": profile}) == "Ally"
    assert pick_name({"name": "alice", "profile": {**profile, "display_name": "  "}}) == "Alice Anderson"
    assert pick_name({"name": "alice", "profile": {"display_name": "", "real_name": ""}}) == "alice"
    assert pick_name({"profile": None}) == ""


async def test_questions_about_one_user_at_once_share_one_call(client: AsyncWebClient, fake_slack: FakeSlack) -> None:
    add_alice(fake_slack)
    fake_slack.users.hold = asyncio.Event()  # the call stays open until every question is asked
    names = UserNames(client, timeout=30)
    questions = [asyncio.create_task(names.name_of(ALICE)) for _ in range(3)]
    await fake_slack.wait_for(lambda: len(fake_slack.calls_to("users.info")) >= 1)
    await asyncio.sleep(0)  # let every question reach the shared lookup
    fake_slack.users.hold.set()
    assert await asyncio.gather(*questions) == ["Ally"] * 3
    assert len(fake_slack.calls_to("users.info")) == 1


async def test_a_name_is_asked_again_after_its_ttl_so_renames_show_up(
    client: AsyncWebClient, fake_slack: FakeSlack
) -> None:
    clock = Clock()
    names = UserNames(client, clock=clock)
    add_alice(fake_slack)
    assert await names.name_of(ALICE) == "Ally"
    fake_slack.users.add(ALICE, "alice", real_name="Alice Anderson", display_name="Al")
    clock.now += NAME_TTL - 1
    assert await names.name_of(ALICE) == "Ally"
    clock.now += 2
    assert await names.name_of(ALICE) == "Al"
    assert len(fake_slack.calls_to("users.info")) == 2


async def test_missing_scope_is_cached_briefly_and_logged_once_with_the_fix(
    client: AsyncWebClient, fake_slack: FakeSlack
) -> None:
    clock = Clock()
    names = UserNames(client, clock=clock)
    add_alice(fake_slack)
    fake_slack.users.scope_granted = False
    with capture_logs() as logs:
        assert await names.name_of(ALICE) == ""
        assert await names.name_of(BOB) == ""
        assert await names.name_of(ALICE) == ""
    assert len(fake_slack.calls_to("users.info")) == 2, "Alice's failure was cached"
    [entry] = [e for e in logs if e["event"] == "slack.user.name_unavailable"]
    assert entry["reason"] == "missing_scope" and entry["log_level"] == "warning"
    assert "users:read" in entry["hint"] and "reinstall" in entry["hint"]
    fake_slack.users.scope_granted = True  # the app was reinstalled with the scope
    clock.now += FAILURE_TTL + 1
    assert await names.name_of(ALICE) == "Ally"


async def test_a_slow_lookup_gives_up_for_this_message_and_fills_the_cache_later(
    client: AsyncWebClient, fake_slack: FakeSlack
) -> None:
    add_alice(fake_slack)
    fake_slack.users.hold = asyncio.Event()
    names = UserNames(client, timeout=0.05)
    assert await asyncio.wait_for(names.name_of(ALICE), 30) == ""  # wait_for only guards against a hang
    assert names.cached(ALICE) is None
    fake_slack.users.hold.set()
    await eventually(lambda: names.cached(ALICE) is not None, "the late answer to be cached")
    assert await names.name_of(ALICE) == "Ally"
    assert len(fake_slack.calls_to("users.info")) == 1


async def test_the_cache_forgets_the_least_recently_used_user_first(
    client: AsyncWebClient, fake_slack: FakeSlack
) -> None:
    for user in ("U0A", "U0B", "U0C"):
        fake_slack.users.add(user, user.lower())
    names = UserNames(client, max_users=2)
    for user in ("U0A", "U0B", "U0A", "U0C"):
        await names.name_of(user)
    assert (names.cached("U0A"), names.cached("U0B"), names.cached("U0C")) == ("u0a", None, "u0c")
