"""Session rows on PostgreSQL: the queries of ``storage/sessions.py``, as coroutines of an asyncpg connection.

Write functions run inside the store's transaction (``PostgresStore._write``); read functions on a
pooled connection. ``message_count`` is the session's last ``seq`` (``sessions.last_seq``), read with the row.
"""

from __future__ import annotations

from typing import Final

from storage.postgres.connection import Connection
from storage.sessions import Usage

__all__ = ["SESSION_SELECT", "add_usage"]

SESSION_SELECT: Final = """
    SELECT s.id, s.session_key, s.platform, s.chat_id, s.chat_type, s.thread_id, s.user_id, s.title,
           s.model, p.text, s.parent_session_id, s.started_at, s.ended_at, s.end_reason,
           s.last_seq,
           s.input_tokens, s.output_tokens, s.cache_read_tokens,
           s.cache_write_tokens, s.last_prompt_tokens, s.cost_usd
    FROM sessions AS s LEFT JOIN prompts AS p ON p.id = s.prompt_id
"""


async def add_usage(conn: Connection, session_id: str, usage: Usage, now: float) -> bool:
    """Add one model call to the session's counters (``last_prompt_tokens`` replaces) and log it in ``usage``;
    False when there is no such session (nothing written)."""
    updated = await conn.fetchval(
        """UPDATE sessions SET input_tokens = input_tokens + $2, output_tokens = output_tokens + $3,
               cache_read_tokens = cache_read_tokens + $4, cache_write_tokens = cache_write_tokens + $5,
               last_prompt_tokens = $6, cost_usd = cost_usd + $7
           WHERE id = $1 RETURNING 1""",
        session_id, usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_write_tokens,
        usage.last_prompt_tokens, usage.cost_usd,
    )  # fmt: skip
    if updated is None:
        return False
    await conn.execute(
        """INSERT INTO usage (session_id, at, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
                              cost_usd) VALUES ($1, $2, $3, $4, $5, $6, $7)""",
        session_id, now, usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_write_tokens,
        usage.cost_usd,
    )  # fmt: skip
    return True
