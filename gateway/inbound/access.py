"""Who may talk to the bot, and where it answers. Default: nobody.

A message is answered when all of these hold:

1. it is not from a bot;
2. in a group or channel: the bot was mentioned or replied to (when the
   platform's ``require_mention`` is on) and the chat is allowed (when an
   allowlist of chats / channels / servers is set);
3. the sender is allowed: ``allow_all``, listed in ``allowed_users``, or
   approved through pairing.

An unknown user's DM is offered a pairing code instead. Every refusal has a
reason that goes to the log (debug level), and ``/whoami`` shows a user their
ids and status.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from adapters.contract import AccessPolicy, ChatType, InboundMessage


class Verdict(StrEnum):
    ALLOW = "allow"
    IGNORE = "ignore"
    PAIR = "pair"
    """An unknown user in a DM: answer with a pairing code, not with the agent."""


_DEFAULT_POLICY = AccessPolicy()


@dataclass(frozen=True, slots=True)
class Decision:
    verdict: Verdict
    reason: str

    @property
    def allowed(self) -> bool:
        return self.verdict is Verdict.ALLOW


@dataclass
class AccessControl:
    policies: dict[str, AccessPolicy] = field(default_factory=dict)

    def policy(self, platform: str) -> AccessPolicy:
        return self.policies.get(platform, _DEFAULT_POLICY)

    def where(self, message: InboundMessage) -> Decision:
        """Whether the bot should answer in this place at all (before looking at the user)."""
        policy = self.policy(message.platform)
        if message.from_bot:
            return Decision(Verdict.IGNORE, "message from a bot")
        if message.chat_type is ChatType.DM:
            return Decision(Verdict.ALLOW, "direct message")
        if policy.allowed_servers and (message.server_id or "") not in policy.allowed_servers:
            return Decision(Verdict.IGNORE, f"server {message.server_id} is not in allowed servers")
        if policy.allowed_chats and message.chat_id not in policy.allowed_chats:
            return Decision(Verdict.IGNORE, f"chat {message.chat_id} is not in the allowed chats")
        if policy.require_mention and not message.mentioned:
            return Decision(Verdict.IGNORE, "group message without a mention or reply to the bot")
        return Decision(Verdict.ALLOW, "group message addressed to the bot")

    def who(self, message: InboundMessage, *, approved: bool) -> Decision:
        """Whether the sender may use the bot."""
        policy = self.policy(message.platform)
        if policy.allow_all:
            return Decision(Verdict.ALLOW, "the platform allows everyone")
        if message.user_id in policy.allowed_users:
            return Decision(Verdict.ALLOW, "user is in allowed_users")
        if approved:
            return Decision(Verdict.ALLOW, "user was approved through pairing")
        if message.chat_type is ChatType.DM:
            return Decision(Verdict.PAIR, "unknown user in a direct message")
        return Decision(Verdict.IGNORE, f"user {message.user_id} is not allowed")
