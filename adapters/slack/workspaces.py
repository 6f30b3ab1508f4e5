"""Which workspaces' events the Slack adapter takes in: the one it is installed in, and those listed.

Signed events can come from people outside the installed workspace: an app
distributed to several workspaces gets every installation's events on the same
Request URL or app-level socket, and in a Slack Connect channel (one shared with
another organisation) the people of the other side talk too. The gateway's
``allow_all`` means "everyone in the workspace", so the adapter stops both
before anything reaches the gateway, and acknowledges them (Slack must not
deliver them again).

Where Slack says which team is which (its Events API and Slack Connect
documentation, and Bolt's reading of them in ``slack_bolt.request.internals``):

* the installation the event was delivered for is ``authorizations[0]``. The
  envelope's ``team_id`` / ``enterprise_id`` name the workspace the event
  happened in, which in a shared channel is the workspace that started the
  channel, so they stand for the installation only in a payload without
  ``authorizations``;
* the sender's workspace is ``event.user_team``; ``event.team``,
  ``event.source_team`` and ``event.user_profile.team`` say the same where they
  are present. Every one present must be ours or listed: any other marks the
  sender as an external user.

The rules, for every event that would start a turn:

1. The installation must be the installed workspace (``team_id`` from
   auth.test) or a team in ``allowed_teams``; otherwise the event is refused,
   whatever ``allow_all`` says.
2. A sender from another workspace is let through only when their team is in
   ``allowed_teams`` or their user id is in ``allowed_users``. ``allow_all``
   and pairing never reach them: they are refused here, so they are not even
   offered a pairing code. A listed team counts as the workspace itself
   (``allow_all`` covers its people; otherwise ``allowed_users`` and pairing).

Whose workspace a person is in also matters when the bot answers: a reply
streamed into a channel names its recipient and the recipient's team
(``chat.startStream``). :meth:`Workspaces.note_sender` remembers the team of
each sender let through (the latest :data:`MAX_SENDERS`), and
:meth:`Workspaces.team_of` gives it back, or the installed workspace for a
person it has not seen.

Enterprise Grid: the organisation's id (``E…``, from auth.test) counts as
ours, because Slack names a member's organisation instead of a workspace in
some events. Another workspace of the same organisation is another workspace:
list it in ``allowed_teams`` (a whole organisation can be listed by its
``E…`` id). Org-wide installs are off in the documented manifest
(``org_deploy_enabled: false``); one would need its workspaces listed.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from adapters.slack.identity import BotIdentity

_SENDER_TEAM_FIELDS = ("user_team", "source_team", "team")
MAX_SENDERS: Final = 10_000
"""Senders whose team is remembered, least recently seen forgotten first."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why an event from outside the workspace is refused, with the team ids for the log (never content)."""

    reason: str
    teams: dict[str, str] = field(default_factory=dict)
    other_installation: bool = False
    """The event was delivered for another installation of the app: unexpected, worth a warning."""


class Workspaces:
    """The workspace rule for one installed bot and the operator's ``allowed_teams`` / ``allowed_users``."""

    def __init__(
        self, bot: BotIdentity, *, allowed_teams: Iterable[str] = (), allowed_users: Iterable[str] = ()
    ) -> None:
        ours = {team for team in (bot.team_id, bot.enterprise_id) if team}
        self._installed = bot.team_id or bot.enterprise_id or ""
        self._accepted = frozenset(ours | set(allowed_teams))
        self._allowed_users = frozenset(allowed_users)
        self._senders: OrderedDict[str, str] = OrderedDict()
        """user id -> the team the user's latest event named."""

    def refusal(self, body: Mapping[str, Any]) -> Refusal | None:
        """None when the event may go on to the gateway; otherwise why not."""
        installation = _installation(body)
        teams = {"team": installation or "none", "installed_team": self._installed}
        if installation not in self._accepted:
            return Refusal(
                "delivered for the app's installation in another workspace; only the installed workspace and "
                "platforms.slack.allowed_teams are answered",
                teams,
                other_installation=True,
            )
        event = body.get("event")
        if not isinstance(event, Mapping):
            return None
        foreign = sorted(team for team in _sender_teams(event) if team not in self._accepted)
        user = event.get("user")
        if not foreign or (isinstance(user, str) and user in self._allowed_users):
            return None
        return Refusal(
            "external user from another workspace (Slack Connect); allow_all does not reach them: list their team "
            "in platforms.slack.allowed_teams or their id in allowed_users",
            {**teams, "user": user if isinstance(user, str) else "", "user_team": ",".join(foreign)},
        )


    def note_sender(self, body: Mapping[str, Any]) -> None:
        """Remember the team of the sender of an event that was let through."""
        event = body.get("event")
        if not isinstance(event, Mapping):
            return
        user = event.get("user")
        teams = [event.get(name) for name in _SENDER_TEAM_FIELDS]
        team = next((t for t in teams if isinstance(t, str) and t), None)
        if not isinstance(user, str) or not user or team is None:
            return
        self._senders[user] = team
        self._senders.move_to_end(user)
        while len(self._senders) > MAX_SENDERS:
            self._senders.popitem(last=False)

    def team_of(self, user_id: str | None) -> str | None:
        """The team ``user_id`` belongs to as far as the bot has seen; the installed workspace otherwise."""
        return self._senders.get(user_id or "") or self._installed or None


def _installation(body: Mapping[str, Any]) -> str:
    """The team (or, for an org-wide install, the organisation) the event was delivered to."""
    authorizations = body.get("authorizations")
    if isinstance(authorizations, list) and authorizations and isinstance(authorizations[0], Mapping):
        source: Mapping[str, Any] = authorizations[0]
    else:
        source = body
    team = source.get("team_id") or source.get("enterprise_id")
    return team if isinstance(team, str) else ""


def _sender_teams(event: Mapping[str, Any]) -> set[str]:
    """Every team id the event gives for its sender; a value that is not a string is no team of ours."""
    values = [event.get(name) for name in _SENDER_TEAM_FIELDS]
    profile = event.get("user_profile")
    if isinstance(profile, Mapping):
        values.append(profile.get("team"))
    return {value if isinstance(value, str) else "(not an id)" for value in values if value not in (None, "")}
