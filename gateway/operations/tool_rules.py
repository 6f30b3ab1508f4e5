"""Tool access rules that cannot do what they say, for ``switchboard check`` to warn about.

An ``allow`` rule of a tool server (``tools.mcp_servers.<n>.allow``) narrows who gets the server's
tools; it never lets anyone talk to the bot. A rule naming a user the platform does not let in
(not in ``platforms.<name>.allowed_users``, and ``allow_all`` off) grants that user nothing,
unless the operator approves them through pairing: most likely a mistyped id or a forgotten entry
in ``allowed_users``. Pairing approvals live in the database, which ``check`` does not read, so
the warning names that way in and leaves the judgement to the operator.
"""

from __future__ import annotations

from config.models import PlatformsConfig, Settings
from config.tools import ToolRule


def tool_rule_warnings(settings: Settings) -> list[str]:
    """One line per ``allow`` rule that names users its platforms do not let in."""
    warnings = []
    for n, server in enumerate(settings.tools.mcp_servers):
        if not server.enabled:
            continue
        for m, rule in enumerate(server.allow):
            if outsiders := _users_not_let_in(rule, settings.platforms):
                places = rule.platforms or [name for name, _ in settings.platforms.sections()]
                where = " or ".join(f"platforms.{name}.allowed_users" for name in places)
                warnings.append(
                    f"tools.mcp_servers.{n}.allow.{m} (server {server.name}) names "
                    f"{'users' if len(outsiders) > 1 else 'user'} {', '.join(outsiders)}, not in {where} "
                    f"(and allow_all is off): unless approved through pairing they cannot talk to the bot, so the "
                    f"rule gives them nothing; check the ids, or add them to allowed_users"
                )
    return warnings


def _users_not_let_in(rule: ToolRule, platforms: PlatformsConfig) -> list[str]:
    """The users of ``rule`` that none of its platforms (every platform when it names none) lets in."""
    sections = [section for name, section in platforms.sections() if not rule.platforms or name in rule.platforms]
    if any(getattr(section, "allow_all", False) for section in sections):
        return []
    listed = {user for section in sections for user in getattr(section, "allowed_users", ())}
    return [user for user in rule.users if user not in listed]
