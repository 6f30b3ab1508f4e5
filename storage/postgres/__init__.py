"""The PostgreSQL storage engine: the same storage surface as SQLite, on a PostgreSQL server (asyncpg)."""
