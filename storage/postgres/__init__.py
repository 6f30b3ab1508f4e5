"""The PostgreSQL storage engine, being built for issue 30: the same storage surface as the SQLite
``Store`` (``storage/contract.py``), on a PostgreSQL 15 server through asyncpg.

Not wired into config yet: nothing opens it until ``storage.url`` can name a PostgreSQL server.
So far it holds its schema (``schema.py``), the migrations that bring a database to it
(``migrations.py``), the search query language turned into PostgreSQL's (``search_query.py``), and
running a transaction until it lands (``retry.py``, on the errors ``faults.py`` sorts).
"""
