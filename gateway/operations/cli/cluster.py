"""``switchboard cluster status``: the replicas on the home's PostgreSQL database, what each holds and works on.

    switchboard cluster status [--verbose] [--sessions N] [--json]

Prints the replicas seen in the last minute (name, incarnation, host, pid, alive or expired, when last
seen, version), the connection leases with their holders, fences and the holders' expiries, and how many
conversations (sessions) each replica claims; ``--verbose`` lists the first ``--sessions`` claimed keys
(default 20). ``--json`` prints one document for scripts. It only reads, and works beside running
replicas, also from a machine that runs none (it needs the same configuration: storage.url and its
password). Ages are measured on the database server's clock (``gateway/cluster/status.py``).
Exit status: 0, 1 when the database cannot be read (the message says why and what to do), 2 for a
configuration that has no cluster to show (a SQLite home) and other configuration errors.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from config.loader import LoadedConfig
from gateway.cluster.status import SEEN_WITHIN, ClusterView, read_view
from gateway.operations.cli.common import EXIT_CONFIG, add_config_option, load_config_or_exit, log_warnings_to_stderr, show
from gateway.operations.cli.sessions import _table as table
from gateway.operations.database_health import cannot_open
from gateway.store_setup import database_name, open_configured_store
from storage import StorageError
from storage.cluster import LeaseRecord, ReplicaRecord, cluster_of

EXIT_OK = 0
EXIT_FAILED = 1
NEEDS_POSTGRESQL = (
    "cluster status needs storage.url: postgresql://... (several gateways share a PostgreSQL database; this home's "
    "database is the SQLite file {path}, which one gateway has alone)"
)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "cluster",
        help="look at the replicas sharing the PostgreSQL database (cluster mode)",
        description="Look at the gateway replicas that share the home's PostgreSQL database (cluster.enabled).",
    )
    commands = parser.add_subparsers(dest="cluster_command", metavar="COMMAND", required=True)
    status = commands.add_parser(
        "status",
        help="the replicas, the leases they hold and the conversations they claim",
        description="The replicas seen in the last minute, the connection leases with their holders and expiries, "
        "and the conversations (sessions) each replica claims.",
    )
    add_config_option(status)
    status.add_argument("--json", action="store_true", help="print JSON for scripts")
    status.add_argument("-v", "--verbose", action="store_true", help="also list the claimed sessions' keys")
    status.add_argument("--sessions", type=_count, default=20, metavar="N",
                        help="with --verbose: list at most this many claimed sessions (default 20)")  # fmt: skip
    status.set_defaults(handler=status_command)


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected 1 or more, got {value}")
    return value


def status_command(args: argparse.Namespace) -> int:
    loaded = load_config_or_exit(args)
    log_warnings_to_stderr()
    if loaded.engine != "postgresql":
        show(f"switchboard cluster status: {NEEDS_POSTGRESQL.format(path=loaded.db_path)}", sys.stderr)
        return EXIT_CONFIG
    try:
        view = asyncio.run(_read(loaded))
    except StorageError as error:
        show(f"switchboard cluster status: {cannot_open(database_name(loaded), error)}", sys.stderr)
        return EXIT_FAILED
    if view is None:
        show("switchboard cluster status: this build's PostgreSQL store keeps no cluster state", sys.stderr)
        return EXIT_FAILED
    if not loaded.settings.cluster.enabled:
        show("note: cluster.enabled is off in this configuration (a gateway started with it runs alone)", sys.stderr)
    shown = args.sessions if args.verbose else 0
    if args.json:
        print(json.dumps(as_json(view, database_name(loaded), sessions=shown), ensure_ascii=False, indent=2))
    else:
        show(render(view, database_name(loaded), sessions=shown))
    return EXIT_OK


async def _read(loaded: LoadedConfig) -> ClusterView | None:
    store = await open_configured_store(loaded)
    try:
        cluster = cluster_of(store)
        return None if cluster is None else await read_view(cluster)
    finally:
        await store.close()


# -- rendering -----------------------------------------------------------------------------------


def as_json(view: ClusterView, database: str, *, sessions: int = 0) -> dict[str, Any]:
    claimed = view.claimed_by()
    document: dict[str, Any] = {
        "database": database,
        "server_time": view.now,
        "seen_within_s": SEEN_WITHIN,
        "replicas": [
            {"name": r.name, "id": r.id, "host": r.host, "pid": r.pid, "version": r.version, "alive": r.alive,
             "started_at": r.started_at, "seen_s_ago": view.since(r.seen_at),
             "expires_in_s": round(r.expires_at - view.now, 1), "sessions_claimed": claimed[r.id],
             "config": r.info.get("config"),
             "leases": [lease.name for lease in view.leases_of(r.id)]}
            for r in view.replicas
        ],
        "leases": [
            {"name": lease.name, "holder": lease.holder, "holder_name": _name_of(view, lease.holder), "fence": lease.fence,
             "held_for_s": view.since(lease.acquired_at) if lease.holder else None,
             "holder_expires_in_s": _expires_in(view, lease), "takeovers": lease.takeovers}
            for lease in view.leases
        ],
        "sessions_claimed": {"total": len(view.claims), "complete": view.claims_complete, "by_replica": dict(claimed)},
    }  # fmt: skip
    if sessions:
        document["sessions"] = [
            {"session_key": c.session_key, "holder": c.holder, "fence": c.fence, "claimed_s_ago": view.since(c.claimed_at)}
            for c in view.claims[:sessions]
        ]
    return document


def render(view: ClusterView, database: str, *, sessions: int = 0) -> str:
    when = datetime.fromtimestamp(view.now, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    expired = len(view.replicas) - view.alive
    lines = [f"Cluster on {database} (the server's clock: {when})", ""]
    lines.append(f"Replicas seen in the last {SEEN_WITHIN:.0f} s: {len(view.replicas)}, {view.alive} alive"
                 + (f", {expired} expired (dead: their work is taken over once they are reaped)" if expired else ""))  # fmt: skip
    claimed = view.claimed_by()
    if view.replicas:
        lines.append(table(
            ["NAME", "INCARNATION", "HOST", "PID", "STATE", "SEEN", "VERSION", "SESSIONS", "LEASES"],
            [_replica_row(view, r, claimed[r.id]) for r in view.replicas],
        ))  # fmt: skip
        lines += _configs(view)
    else:
        lines.append("  none: no replica in cluster mode has beaten within the last minute")
    lines += ["", f"Leases: {len(view.leases)}"]
    if view.leases:
        lines.append(table(["LEASE", "HOLDER", "FENCE", "HELD FOR", "HOLDER EXPIRES", "TAKEOVERS"],
                           [_lease_row(view, lease) for lease in view.leases]))  # fmt: skip
    total = f"{len(view.claims)}" if view.claims_complete else f"at least {len(view.claims)}"
    by = ", ".join(f"{_name_of(view, holder)}: {n}" for holder, n in claimed.most_common())
    lines += ["", f"Sessions claimed: {total}" + (f" ({by})" if by else "")]
    if sessions and view.claims:
        shown = view.claims[:sessions]
        lines.append(table(["SESSION", "HOLDER", "FENCE", "CLAIMED"],
                           [[c.session_key, _name_of(view, c.holder), str(c.fence), _ago(view.since(c.claimed_at))]
                            for c in shown]))  # fmt: skip
        if len(view.claims) > len(shown):
            lines.append(f"  ... and {len(view.claims) - len(shown)} more (--sessions N shows more)")
    return "\n".join(lines)


def _configs(view: ClusterView) -> list[str]:
    """A warning when the replicas alive run different configurations (each reports a digest of its own)."""
    digests: dict[str, list[str]] = {}
    for replica in view.replicas:
        if replica.alive and replica.info.get("config"):
            digests.setdefault(str(replica.info["config"]), []).append(replica.name)
    if len(digests) <= 1:
        return []
    which = "; ".join(f"{', '.join(names)}: {digest}" for digest, names in digests.items())
    return [f"WARNING: the replicas run different configurations ({which}); give each the same config.yaml and "
            "restart them one at a time"]


def _replica_row(view: ClusterView, replica: ReplicaRecord, sessions: int) -> Sequence[str]:
    leases = ", ".join(lease.name for lease in view.leases_of(replica.id)) or "-"
    return [replica.name, replica.id, replica.host, str(replica.pid), "alive" if replica.alive else "EXPIRED",
            _ago(view.since(replica.seen_at)), replica.version, str(sessions), leases]  # fmt: skip


def _lease_row(view: ClusterView, lease: LeaseRecord) -> Sequence[str]:
    if lease.holder is None:
        return [lease.name, "(free)", str(lease.fence), "-", "-", str(lease.takeovers)]
    expires = _expires_in(view, lease)
    expiry = "-" if expires is None else (f"in {expires:.1f} s" if expires >= 0 else f"EXPIRED {-expires:.1f} s ago")
    return [lease.name, _name_of(view, lease.holder), str(lease.fence), _ago(view.since(lease.acquired_at), suffix=""),
            expiry, str(lease.takeovers)]  # fmt: skip


def _expires_in(view: ClusterView, lease: LeaseRecord) -> float | None:
    return None if lease.holder_expires_at is None else round(lease.holder_expires_at - view.now, 1)


def _name_of(view: ClusterView, incarnation: str | None) -> str | None:
    """A holder as an operator knows it: the replica's name, with the incarnation when it is not among those seen."""
    if incarnation is None:
        return None
    replica = view.replica(incarnation)
    return replica.name if replica is not None else incarnation


def _ago(seconds: float | None, *, suffix: str = " ago") -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.1f} s{suffix}"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return (f"{hours} h {minutes} min" if hours else f"{minutes} min {secs} s") + suffix
