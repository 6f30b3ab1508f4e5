"""What the PostgreSQL modules run their SQL on: an asyncpg connection, or the pool's proxy for one."""

from __future__ import annotations

import asyncpg

__all__ = ["Connection"]

Connection = asyncpg.Connection | asyncpg.pool.PoolConnectionProxy
