"""Events that must not stop the bot for everyone: malformed fields, and half a UTF-16 pair where no one looks.

A signed event whose fields are missing or of the wrong type (no ``ts``, a
``ts`` that is no number, no ``user``, ``files`` that is no list of objects)
is acknowledged, so Slack does not send it again and again, and logged as
``slack.event.rejected`` with its ids and the reason, never its text. Half of
a UTF-16 pair (a lone ``\\ud800`` JSON escape) in a file name or a rich-text
block is stored as U+FFFD and answered. In both modes the next message is answered.
"""

from __future__ import annotations

from typing import Any

from structlog.testing import capture_logs

from tests.adapters.slack.conftest import ALICE, DM, SIGNING_SECRET, STRANGER, SlackFactory
from tests.fakes.model_server import ModelServer
from tests.fakes.slack_api import Post, message, post_signed

HALF = "\ud800"
"""Half of a UTF-16 surrogate pair: valid in a JSON string escape, impossible to encode as UTF-8."""
SECRET_WORDS = "secret words"


def malformed_events() -> list[dict[str, Any]]:
    """A stranger's DMs that no Slack should send this way, each wrong in one field."""
    no_ts = message(DM, STRANGER, SECRET_WORDS)
    del no_ts["event"]["ts"]
    odd_user = message(DM, STRANGER, SECRET_WORDS)
    odd_user["event"]["user"] = {"id": STRANGER}
    return [
        message(DM, STRANGER, SECRET_WORDS, ts="not-a-number"),
        message(DM, STRANGER, SECRET_WORDS, ts="nan"),
        no_ts,
        message(DM, None, SECRET_WORDS),
        odd_user,
        message(DM, STRANGER, [SECRET_WORDS]),  # type: ignore[arg-type]
        message(DM, STRANGER, SECRET_WORDS, thread_ts={"ts": "1.1"}),
        message(DM, STRANGER, SECRET_WORDS, subtype="file_share", files=7),
        message(DM, STRANGER, SECRET_WORDS, subtype="file_share", files=[{"id": "F1", "name": {"x": 1}}]),
    ]


def half_pairs() -> dict[str, Any]:
    """Alice's DM with half a surrogate pair in a file name and in a rich-text block (the text is fine)."""
    blocks = [{"type": "rich_text", "elements": [{"type": "rich_text_section",
                                                  "elements": [{"type": "text", "text": f"look {HALF}"}]}]}]  # fmt: skip
    files = [{"id": "F0HALF", "name": f"notes{HALF}.pdf", "title": HALF, "mimetype": "application/pdf", "size": 10}]
    return message(DM, ALICE, "look", subtype="file_share", files=files, blocks=blocks)


def check_answers(posts: list[Post], model_server: ModelServer) -> None:
    """Alice's message with half pairs was answered, with U+FFFD in the file name (its download fails here, and
    the user is told so first), and then the next one."""
    assert [post.text.split("\n")[0].split(":")[0] for post in posts] == [
        "I couldn't use notes\ufffd.pdf", "ok", "ok"
    ]  # fmt: skip
    assert [post.text.split("\n")[0] for post in posts][1:] == ["ok: look", "ok: the next one"]
    assert "notes\ufffd.pdf" in model_server.requests[0].last_user_text


def check_rejected(logs: list[dict[str, Any]], events: list[dict[str, Any]]) -> None:
    rejected = [entry for entry in logs if entry["event"] == "slack.event.rejected"]
    assert [entry["event_id"] for entry in rejected] == [payload["event_id"] for payload in events]
    assert all(entry["reason"] for entry in rejected)
    assert SECRET_WORDS not in str(rejected)


async def test_http_mode_acknowledges_malformed_events_and_answers_the_next(
    start_slack: SlackFactory, model_server: ModelServer
) -> None:
    slack = await start_slack("http")
    poison = malformed_events()
    with capture_logs() as logs:
        statuses = [(await post_signed(slack.url, payload, SIGNING_SECRET)).status for payload in poison]
        assert (await post_signed(slack.url, half_pairs(), SIGNING_SECRET)).status == 200
        await slack.api.wait_posts(2)
        assert (await post_signed(slack.url, message(DM, ALICE, "the next one"), SIGNING_SECRET)).status == 200
        await slack.api.wait_posts(3)
    assert statuses == [200] * len(poison)
    check_answers(slack.api.posts, model_server)
    check_rejected(logs, poison)


def unreadable_for_bolt() -> list[dict[str, Any]]:
    """Events slack-bolt itself cannot read (it builds its context from them before any listener runs)."""
    not_an_object = message(DM, STRANGER, SECRET_WORDS)
    not_an_object["event"] = SECRET_WORDS
    odd_type = message(DM, STRANGER, SECRET_WORDS)
    odd_type["event"]["type"] = ["message"]
    odd_team = message(DM, STRANGER, SECRET_WORDS)
    odd_team["team_id"] = 5
    odd_channel = message(DM, STRANGER, SECRET_WORDS)
    odd_channel["event"]["channel"] = {"id": DM}
    return [not_an_object, odd_type, odd_team, odd_channel]


async def test_socket_mode_acknowledges_malformed_events_and_answers_the_next(
    start_slack: SlackFactory, model_server: ModelServer
) -> None:
    slack = await start_slack("socket")
    await slack.api.wait_connections(1)
    poison = [*malformed_events(), *unreadable_for_bolt()]  # over HTTP the latter get 400 (test_malformed_requests)
    with capture_logs() as logs:
        envelopes = [await slack.api.push_event(payload) for payload in [*poison, half_pairs()]]
        await slack.api.wait_posts(2)
        envelopes.append(await slack.api.push_event(message(DM, ALICE, "the next one")))
        for envelope_id in envelopes:
            await slack.api.wait_acked(envelope_id)
        await slack.api.wait_posts(3)
    check_answers(slack.api.posts, model_server)
    check_rejected(logs, poison)
