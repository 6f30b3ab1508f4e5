"""Which workspaces the bot answers: its own, the ones in ``allowed_teams``, and nobody else's people.

Through the real gateway and slack-bolt, in HTTP mode (signed requests) and Socket Mode. A
refused event is acknowledged like any other (Slack must not deliver it again) and never
reaches the gateway's inbox, which is what the tests look at: the inbox keeps every event it
was given, answered or not, so an event missing from it was stopped at the adapter.
"""

from __future__ import annotations

from typing import Any

import pytest
from structlog.testing import capture_logs

from adapters.slack.identity import BotIdentity
from adapters.slack.workspaces import Workspaces
from tests.adapters.slack.conftest import ALICE, CHANNEL, DM, SIGNING_SECRET, RunningSlack, SlackFactory
from tests.fakes.model_server import ModelServer
from tests.fakes.slack_api import (
    BOT_USER_ID,
    TEAM_ID,
    from_other_workspace,
    in_shared_channel,
    mention,
    message,
    message_key,
    post_signed,
)

OTHER_TEAM = "T0OTHER"
"""A workspace the app is also installed in (or that forged nothing, but is simply not ours)."""
PARTNER = "T0PARTNER"
"""A workspace that shares a Slack Connect channel with ours."""
SHARED = "C0SHARED"
EXTERNAL = "U0EXTERNAL"
"""A member of another workspace, in a shared channel."""


async def never_stored(slack: RunningSlack, payload: dict[str, Any]) -> bool:
    """True when the gateway's inbox never received this event (it accepts it now as new)."""
    return await slack.store.inbox_accept("slack", message_key(payload), "probe", {})


async def answered_after(slack: RunningSlack, *payloads: dict[str, Any], expect: tuple[str, ...] = ()) -> list[str]:
    """POST ``payloads`` (each acknowledged with 200), then a DM from Alice; the texts posted once she and
    ``expect`` are answered (each conversation is its own session, answered in any order)."""
    for payload in payloads:
        assert (await post_signed(slack.url, payload, SIGNING_SECRET)).status == 200
    await post_signed(slack.url, message(DM, ALICE, "marker"), SIGNING_SECRET)
    await slack.api.wait_for(lambda: {"ok: marker", *expect} <= {p.text for p in slack.api.posts})
    return [p.text for p in slack.api.posts]


async def test_an_event_for_another_workspace_is_not_answered_even_with_allow_all(
    start_slack: SlackFactory, model_server: ModelServer
) -> None:
    slack = await start_slack("http", allow_all=True)
    theirs_dm = from_other_workspace(message("D0THEIRS", "U0THEIRS", "hello from elsewhere"), OTHER_TEAM)
    theirs_mention = from_other_workspace(mention("C0THEIRS", "U0THEIRS", f"<@{BOT_USER_ID}> hi"), OTHER_TEAM)
    assert await answered_after(slack, theirs_dm, theirs_mention) == ["ok: marker"]
    assert await never_stored(slack, theirs_dm) and await never_stored(slack, theirs_mention)
    assert len(model_server.requests) == 1


async def test_an_external_user_in_a_shared_channel_is_a_stranger_even_with_allow_all(
    start_slack: SlackFactory, model_server: ModelServer
) -> None:
    slack = await start_slack("http", allow_all=True)
    external = in_shared_channel(mention(SHARED, EXTERNAL, f"<@{BOT_USER_ID}> answer me"),
                                 sender_team=PARTNER, host_team=PARTNER)  # fmt: skip
    assert await answered_after(slack, external) == ["ok: marker"]
    assert await never_stored(slack, external)
    assert len(model_server.requests) == 1


async def test_a_member_of_the_workspace_is_answered_in_a_channel_another_workspace_shares(
    start_slack: SlackFactory,
) -> None:
    slack = await start_slack("http")
    ours = in_shared_channel(mention(SHARED, ALICE, f"<@{BOT_USER_ID}> from our side"),
                             sender_team=TEAM_ID, host_team=PARTNER)  # fmt: skip
    texts = await answered_after(slack, ours, expect=("ok: from our side",))
    assert sorted(texts) == ["ok: from our side", "ok: marker"]


@pytest.mark.parametrize("shape", ["shared channel", "their installation"])
async def test_a_listed_team_counts_as_the_workspace(start_slack: SlackFactory, shape: str) -> None:
    slack = await start_slack("http", allow_all=True, allowed_teams=[PARTNER])
    said = mention(SHARED, EXTERNAL, f"<@{BOT_USER_ID}> partner here")
    payload = (
        in_shared_channel(said, sender_team=PARTNER, host_team=PARTNER)
        if shape == "shared channel"
        else from_other_workspace(said, PARTNER)
    )
    texts = await answered_after(slack, payload, expect=("ok: partner here",))
    assert sorted(texts) == ["ok: marker", "ok: partner here"]


async def test_an_external_user_named_in_allowed_users_is_answered(start_slack: SlackFactory) -> None:
    slack = await start_slack("http", allowed_users=[ALICE, EXTERNAL])
    external = in_shared_channel(mention(SHARED, EXTERNAL, f"<@{BOT_USER_ID}> listed by name"),
                                 sender_team=PARTNER, host_team=TEAM_ID)  # fmt: skip
    texts = await answered_after(slack, external, expect=("ok: listed by name",))
    assert sorted(texts) == ["ok: listed by name", "ok: marker"]


async def test_an_external_user_of_an_unlisted_team_gets_no_pairing_code(
    start_slack: SlackFactory, model_server: ModelServer
) -> None:
    slack = await start_slack("http")
    external_dm = in_shared_channel(message("D0EXTERNAL", EXTERNAL, "let me in"), sender_team=PARTNER,
                                    host_team=PARTNER)  # fmt: skip
    assert await answered_after(slack, external_dm) == ["ok: marker"]
    assert await never_stored(slack, external_dm)


async def test_a_refused_event_is_logged_with_its_teams_and_without_its_text(start_slack: SlackFactory) -> None:
    slack = await start_slack("http", allow_all=True)
    theirs = from_other_workspace(message("D0THEIRS", "U0THEIRS", "secret words"), OTHER_TEAM)
    external = in_shared_channel(mention(SHARED, EXTERNAL, f"<@{BOT_USER_ID}> private words"),
                                 sender_team=PARTNER, host_team=PARTNER)  # fmt: skip
    with capture_logs() as logs:
        await answered_after(slack, theirs, external)
    rejected = [entry for entry in logs if entry["event"] == "slack.event.rejected"]
    assert [(e["team"], e["installed_team"]) for e in rejected] == [(OTHER_TEAM, TEAM_ID), (TEAM_ID, TEAM_ID)]
    assert rejected[1]["user_team"] == PARTNER and rejected[1]["user"] == EXTERNAL
    assert all(e["reason"] for e in rejected)
    assert not any("words" in str(value) for entry in rejected for value in entry.values())


async def test_socket_mode_acks_and_drops_other_workspaces_and_answers_its_own(
    start_slack: SlackFactory, model_server: ModelServer
) -> None:
    slack = await start_slack("socket", allow_all=True)
    await slack.api.wait_connections(1)
    theirs = from_other_workspace(message("D0THEIRS", "U0THEIRS", "over the socket"), OTHER_TEAM)
    external = in_shared_channel(mention(SHARED, EXTERNAL, f"<@{BOT_USER_ID}> socket stranger"),
                                 sender_team=PARTNER, host_team=PARTNER)  # fmt: skip
    for payload in (theirs, external):
        await slack.api.wait_acked(await slack.api.push_event(payload))
    ours = mention(CHANNEL, ALICE, f"<@{BOT_USER_ID}> socket member")
    await slack.api.wait_acked(await slack.api.push_event(ours))
    [post] = await slack.api.wait_posts(1)
    assert post.text == "ok: socket member"
    assert await never_stored(slack, theirs) and await never_stored(slack, external)
    assert len(model_server.requests) == 1


# --- the rule itself, on payload shapes the emulator does not produce ------------------------------------------------

GRID_BOT = BotIdentity(user_id=BOT_USER_ID, bot_id=None, name="switchbot", team_id=TEAM_ID, enterprise_id="E0ORG")


def envelope_of(event: dict[str, Any], **envelope: Any) -> dict[str, Any]:
    return {"type": "event_callback", "event": {"type": "message", "user": ALICE, **event}, **envelope}


@pytest.mark.parametrize(
    ("body", "refused"),
    [
        # No authorizations (an older payload shape): the envelope's team_id names the installation.
        (envelope_of({}, team_id=TEAM_ID), False),
        (envelope_of({}, team_id=OTHER_TEAM), True),
        (envelope_of({}), True),  # names no workspace at all
        # Slack names the organisation instead of a workspace for some members: the bot's own organisation is ours...
        (envelope_of({"user_team": "E0ORG"}, team_id=TEAM_ID), False),
        # ...another workspace of it is not, and neither is another organisation.
        (envelope_of({"user_team": "T0SISTER"}, team_id=TEAM_ID), True),
        (envelope_of({"user_team": "E0ELSEWHERE"}, team_id=TEAM_ID), True),
        # One foreign marker is enough, wherever it is; a value that is not an id is not ours.
        (envelope_of({"user_team": TEAM_ID, "user_profile": {"team": PARTNER}}, team_id=TEAM_ID), True),
        (envelope_of({"source_team": {"id": TEAM_ID}}, team_id=TEAM_ID), True),
        # The installation comes from authorizations even when the envelope names the channel's other workspace.
        (envelope_of({"team": TEAM_ID}, team_id=PARTNER, authorizations=[{"team_id": TEAM_ID}]), False),
        # An org-wide install's authorization names only the organisation.
        (envelope_of({}, team_id="T0ANY", authorizations=[{"enterprise_id": "E0ORG", "team_id": None}]), False),
    ],
)
def test_which_teams_are_ours(body: dict[str, Any], refused: bool) -> None:
    assert (Workspaces(GRID_BOT).refusal(body) is not None) is refused


def test_a_listed_organisation_covers_its_members() -> None:
    body = envelope_of({"user": EXTERNAL, "user_team": "E0PARTNERORG"}, team_id=TEAM_ID)
    assert Workspaces(GRID_BOT).refusal(body) is not None
    assert Workspaces(GRID_BOT, allowed_teams=["E0PARTNERORG"]).refusal(body) is None
    assert Workspaces(GRID_BOT, allowed_users=[EXTERNAL]).refusal(body) is None
