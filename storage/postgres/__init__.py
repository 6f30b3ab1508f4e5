"""The PostgreSQL storage engine: the storage surface of ``storage/contract.py`` on a PostgreSQL server
(13 or newer; 15 is what the tests run) through asyncpg, chosen by a ``postgresql://`` ``storage.url``.

``store.py`` is ``PostgresStore``: the pool, transactions retried until they land (``retry.py``, on
the errors ``faults.py`` sorts), writes queued per key at the call. The SQL is beside it, one concept
per module, as functions of a connection (``connection.py``): ``sessions.py``, ``messages.py``,
``lineage.py``, ``inbox.py``, ``last_heard.py``, ``outbox.py``, ``outbox_live.py``, ``pairing.py``,
``search.py`` (with ``search_query.py``, the query language as SQL). ``schema.py`` and
``migrations.py`` make the database; ``text.py`` is the rule for what PostgreSQL cannot store (NUL);
``inspection.py`` reads what ``check`` and ``doctor`` report about a server; ``copy_from_sqlite.py``
is ``switchboard storage migrate``.
"""
