"""Durable sessions, messages, lineage, search and the gateway's inbox, outbox and pairing: one SQLite file by
default, or a PostgreSQL database (and the media users send: files in a folder, ``MediaFolder``).

``await open_store(url_or_path)`` opens the SQLite ``Store`` (``storage/store.py``) or, for a ``postgresql://`` URL,
the ``PostgresStore`` (``storage/postgres/``). What any engine must
offer the rest of the project is ``StorageEngine`` (``storage/contract.py``); ``Store`` is the SQLite one.
This package is a leaf: it imports nothing from gateway, agent, adapters or config, and this
module is its only door: other packages import the names below, never a module inside.

Inside, the data model and its operations sit at the top (records, sessions, messages,
lineage, titles, inbox, outbox, pairing, usage, backup, the media folder, the schema and its migrations),
``storage/engine/`` is the write engine (the group-commit writer, its thread, batching, bulk
writes, retries, readers, WAL maintenance), ``storage/search/`` is search (the query,
CJK pairs, the substring vocabulary and its indexer) and ``storage/postgres/`` is the PostgreSQL engine.
"""

from storage.backup import DatabaseCheck, backup_database, check_database, database_in_use, restore_database
from storage.cluster import (
    ClaimRecord,
    ClusterStorage,
    LeaseRecord,
    ReplicaExpiredError,
    ReplicaRecord,
    cluster_of,
)
from storage.contract import BackupHooks, PairingStorage, StorageEngine
from storage.engine.retry import RetryPolicy, is_busy
from storage.engine.writer import MergePolicy
from storage.errors import (
    BackupError,
    DatabaseInUseError,
    Fault,
    InvalidTitleError,
    ReadFailedError,
    SchemaError,
    SchemaTooNewError,
    SessionNotFoundError,
    StorageError,
    StoreClosedError,
    TitleError,
    TitleInUseError,
    WriteFailedError,
    fault_of,
)
from storage.faults import FaultSeam
from storage.ids import new_session_id
from storage.last_heard import LastHeard
from storage.ledger import TurnEnd
from storage.lineage import END_COMPRESSION
from storage.media import MediaFolder, media_files
from storage.messages import MessageAppend
from storage.records import (
    InboxRecord,
    MessageRecord,
    NewMessage,
    OutboxChunk,
    OutboxRecord,
    PairingCode,
    SearchHit,
    SessionRecord,
    ToolCallRecord,
    UsageTotals,
)
from storage.schema import LATEST as SCHEMA_VERSION
from storage.search.fulltext import MAX_HITS as MAX_SEARCH_HITS
from storage.search.fulltext import SearchOwner
from storage.sessions import Usage
from storage.store import Store
from storage.postgres.store import PostgresStore
from storage.opening import engine_of, open_store
from storage.postgres.inspection import MIN_SERVER_VERSION, TESTED_SERVER_VERSION, ServerReport, inspect_server
from storage.postgres.copy_from_sqlite import CopyError, CopyReport, copy_from_sqlite, without_password

__all__ = [
    "BackupError",
    "BackupHooks",
    "ClaimRecord",
    "ClusterStorage",
    "CopyError",
    "CopyReport",
    "DatabaseCheck",
    "DatabaseInUseError",
    "END_COMPRESSION",
    "Fault",
    "FaultSeam",
    "InboxRecord",
    "InvalidTitleError",
    "LastHeard",
    "LeaseRecord",
    "MAX_SEARCH_HITS",
    "MIN_SERVER_VERSION",
    "MediaFolder",
    "MergePolicy",
    "MessageAppend",
    "MessageRecord",
    "NewMessage",
    "OutboxChunk",
    "OutboxRecord",
    "PairingCode",
    "PairingStorage",
    "PostgresStore",
    "ReadFailedError",
    "ReplicaExpiredError",
    "ReplicaRecord",
    "RetryPolicy",
    "SCHEMA_VERSION",
    "SchemaError",
    "SchemaTooNewError",
    "SearchHit",
    "SearchOwner",
    "ServerReport",
    "SessionNotFoundError",
    "SessionRecord",
    "StorageEngine",
    "StorageError",
    "Store",
    "StoreClosedError",
    "TESTED_SERVER_VERSION",
    "TitleError",
    "TitleInUseError",
    "ToolCallRecord",
    "TurnEnd",
    "Usage",
    "UsageTotals",
    "WriteFailedError",
    "backup_database",
    "check_database",
    "cluster_of",
    "copy_from_sqlite",
    "database_in_use",
    "engine_of",
    "fault_of",
    "inspect_server",
    "is_busy",
    "media_files",
    "new_session_id",
    "open_store",
    "restore_database",
    "without_password",
]
