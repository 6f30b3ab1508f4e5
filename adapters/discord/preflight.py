"""Which gateway intents the bot asks for, what that means for what it sees, and which failures are final.

The Message Content intent is privileged: the bot may only request it after it
was switched on in the Developer Portal, or Discord closes the connection with
code 4014. Without it the bot still gets the text of DMs and of messages that
mention it (a reply that pings the bot counts), which is all a mention-only
bot needs, so it is off by default.
"""

from __future__ import annotations

import discord

PORTAL_INTENT_SETTING = (
    "Discord Developer Portal -> your application -> Bot -> Privileged Gateway Intents -> Message Content Intent"
)
PORTAL_TOKEN_SETTING = "Discord Developer Portal -> your application -> Bot -> Reset Token"

UNRECOVERABLE_CLOSE_CODES = {
    4004: "Discord rejected the bot token (gateway close 4004)",
    4010: "Discord reported an invalid shard (gateway close 4010)",
    4011: "Discord requires this bot to use sharding (gateway close 4011), which Switchboard does not do",
    4012: "Discord refused the gateway API version (gateway close 4012)",
    4013: "Discord refused the requested intents as invalid (gateway close 4013)",
    4014: "Discord refused a privileged intent this application may not use (gateway close 4014)",
}


def intents_for(message_content: bool) -> discord.Intents:
    """The smallest set that serves DMs, server channels and threads (no members or presences)."""
    intents = discord.Intents.none()
    intents.guilds = True
    intents.guild_messages = True
    intents.dm_messages = True
    intents.message_content = message_content
    return intents


def describe(intents: discord.Intents) -> dict[str, object]:
    """Log fields for ``discord.intents``: what was requested and what the bot will see because of it."""
    requested = sorted(name for name, enabled in intents if enabled)
    if intents.message_content:
        sees = (
            "message content intent on: the bot reads every message in channels it can see; "
            f"this must also be switched on at {PORTAL_INTENT_SETTING}, or Discord closes with 4014"
        )
    else:
        sees = (
            "message content intent off: the bot only sees the text of DMs and of messages that mention it "
            "(replies that ping it count); with require_mention: false it still cannot read other server messages"
        )
    return {"requested": ",".join(requested), "message_content": intents.message_content, "meaning": sees}


def unrecoverable(error: BaseException | None) -> str | None:
    """For a failure that retrying cannot fix, what happened and what to change; None if a retry may help."""
    if isinstance(error, discord.PrivilegedIntentsRequired):
        return (
            f"{UNRECOVERABLE_CLOSE_CODES[4014]}: switch on {PORTAL_INTENT_SETTING}, "
            "or set platforms.discord.message_content_intent: false (the bot then answers DMs and mentions only)"
        )
    if isinstance(error, discord.LoginFailure):
        return f"Discord rejected the bot token (HTTP 401): {token_hint()}"
    if isinstance(error, discord.ConnectionClosed) and error.code in UNRECOVERABLE_CLOSE_CODES:
        if error.code == 4004:
            return f"{UNRECOVERABLE_CLOSE_CODES[4004]}: {token_hint()}"
        if error.code == 4014:
            return unrecoverable(discord.PrivilegedIntentsRequired(error.shard_id))
        return f"{UNRECOVERABLE_CLOSE_CODES[error.code]}; this is not fixed by reconnecting, please report it"
    return None


def token_hint() -> str:
    return (
        f"create a new token at {PORTAL_TOKEN_SETTING} and put it in DISCORD_BOT_TOKEN "
        "or platforms.discord.token, then restart"
    )
