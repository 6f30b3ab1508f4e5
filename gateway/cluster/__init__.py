"""Cluster mode: several gateway processes (replicas) on one PostgreSQL database (``storage/cluster.py``)."""
