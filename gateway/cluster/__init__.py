"""Several gateways (replicas) on one PostgreSQL database: this process's part in the cluster.

``replica.py`` is this process's incarnation (heartbeat, signals, scans); the parts that share the work
hang off it. The shared state itself is the storage engine's (``storage/cluster.py``).
"""
