"""The write engine: how the store's writes reach the file, and the connections around them.

One writer thread commits everything queued as one transaction (``writer.py``, ``batch.py``,
``bulk.py``, ``worker.py``), retrying while another process holds the lock (``retry.py``,
``transaction.py``); readers query through a small pool (``readers.py``); a background task keeps
the WAL short (``maintenance.py``); ``connection.py`` opens each connection with the pragmas its
role needs. Nothing here knows what a session or a message means beyond the rows it is handed.
Only ``storage`` itself imports from here: callers go through ``storage/__init__.py``.
"""
