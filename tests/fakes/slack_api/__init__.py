"""A local fake of Slack's Web API and Socket Mode, plus helpers to build and sign Events API requests."""

from .events import envelope, from_other_workspace, in_shared_channel, mention, message, message_key, next_ts
from .server import (
    APP_TOKEN,
    BOT_ID,
    BOT_NAME,
    BOT_TOKEN,
    BOT_USER_ID,
    TEAM_ID,
    ApiCall,
    Failure,
    FakeSlack,
    Post,
    Shown,
)
from .signing import Answer, post_signed, post_signed_body, post_signed_form, signature

__all__ = [
    "APP_TOKEN", "BOT_ID", "BOT_NAME", "BOT_TOKEN", "BOT_USER_ID", "TEAM_ID", "Answer", "ApiCall", "Failure",
    "FakeSlack", "Post", "Shown", "envelope", "from_other_workspace", "in_shared_channel", "mention", "message", "message_key",
    "next_ts", "post_signed", "post_signed_body", "post_signed_form", "signature",
]  # fmt: skip
