"""HTTP mode: a correctly signed request whose body is not an Events API payload gets 400, never a 500.

Through the real slack-bolt app behind the adapter's aiohttp endpoint. Unsigned, the same
bodies get 401: the signature is checked before the body is looked at.
"""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from tests.adapters.slack.conftest import ALICE, DM, SIGNING_SECRET, SlackFactory
from tests.fakes.model_server import ModelServer
from tests.fakes.slack_api import message, post_signed, post_signed_body

JSON = "application/json"
FORM = "application/x-www-form-urlencoded"

MALFORMED = [
    pytest.param(b"not json at all", JSON, id="not-json"),
    pytest.param(b'{"type": "event_callback", ', JSON, id="truncated-json"),
    pytest.param(b"\xff\xfe\x00garbage", JSON, id="not-utf8"),
    pytest.param(b"[1, 2, 3]", JSON, id="json-array"),
    pytest.param(b"null", JSON, id="json-null"),
    pytest.param(b'"a string"', JSON, id="json-string"),
    pytest.param(b"42", JSON, id="json-number"),
    pytest.param(b"{}", JSON, id="no-type"),
    pytest.param(b"", JSON, id="empty"),
    pytest.param(b"text=hello&user=U1", FORM, id="form-without-payload"),
    pytest.param(b"payload=not-json", FORM, id="form-payload-not-json"),
    pytest.param(b"payload=%5B1%5D", FORM, id="form-payload-not-an-object"),
    pytest.param(b'{"type": "event_callback", "event_id": "Ev1"}', JSON, id="no-event"),
    pytest.param(b'{"type": "event_callback", "event": [1]}', JSON, id="event-not-an-object"),
    pytest.param(b'{"type": "event_callback", "event": {"channel": "D1"}}', JSON, id="event-without-type"),
    # Bolt reads the ids of team, user and channel before any listener: wrong types there broke it too.
    pytest.param(b'{"type": "event_callback", "event": {"type": "message"}, "team": 5}', JSON, id="team-a-number"),
    pytest.param(b'{"type": "event_callback", "event": {"type": "message", "channel": 7}}', JSON, id="channel-a-number"),
    pytest.param(b'{"type": "event_callback", "event": {"type": "message"}, "authorizations": "x"}', JSON,
                 id="authorizations-a-string"),  # fmt: skip
]


@pytest.mark.parametrize(("body", "content_type"), MALFORMED)
async def test_a_signed_malformed_body_gets_400_and_the_next_event_is_answered(
    start_slack: SlackFactory, model_server: ModelServer, body: bytes, content_type: str
) -> None:
    slack = await start_slack("http", allow_all=True)
    with capture_logs() as logs:
        answer = await post_signed_body(slack.url, body, SIGNING_SECRET, content_type=content_type)
    assert answer.status == 400, answer.text
    assert "malformed" in answer.text
    assert answer.no_retry  # Slack retries any answer but a 2xx unless told not to
    [rejected] = [entry for entry in logs if entry["event"] == "slack.http.rejected"]
    assert rejected["reason"].startswith("malformed body")
    assert (await post_signed(slack.url, message(DM, ALICE, "still here"), SIGNING_SECRET)).status == 200
    [post] = await slack.api.wait_posts(1)
    assert post.text == "ok: still here"
    assert len(model_server.requests) == 1


@pytest.mark.parametrize(("body", "content_type"), MALFORMED[:4])
async def test_an_unsigned_malformed_body_gets_401(start_slack: SlackFactory, body: bytes, content_type: str) -> None:
    slack = await start_slack("http")
    answer = await post_signed_body(slack.url, body, SIGNING_SECRET, content_type=content_type, bad_signature=True)
    assert answer.status == 401


async def test_a_timestamp_header_that_is_not_a_number_gets_401(start_slack: SlackFactory) -> None:
    slack = await start_slack("http")
    answer = await post_signed_body(slack.url, b'{"type": "event_callback"}', SIGNING_SECRET, timestamp="soon")
    assert answer.status == 401


async def test_slacks_ssl_check_is_still_answered(start_slack: SlackFactory) -> None:
    slack = await start_slack("http")
    answer = await post_signed_body(slack.url, b"ssl_check=1&token=legacy", SIGNING_SECRET, content_type=FORM)
    assert answer.status == 200
