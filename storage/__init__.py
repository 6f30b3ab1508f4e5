"""Durable sessions, messages, lineage, search and the gateway's inbox, outbox and pairing: one SQLite file.

``from storage import Store`` and ``await Store.open(path)``; see ``storage/store.py``.
This package is a leaf: it imports nothing from gateway, agent, adapters or config.
"""

from storage.errors import (
    BackupError,
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
from storage.ids import new_session_id
from storage.ledger import TurnEnd
from storage.lineage import END_COMPRESSION
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
from storage.retry import RetryPolicy
from storage.schema import LATEST as SCHEMA_VERSION
from storage.search import SearchOwner
from storage.sessions import Usage
from storage.store import Store
from storage.writer import MergePolicy

__all__ = [
    "BackupError",
    "END_COMPRESSION",
    "Fault",
    "InboxRecord",
    "InvalidTitleError",
    "MergePolicy",
    "MessageAppend",
    "MessageRecord",
    "NewMessage",
    "OutboxChunk",
    "OutboxRecord",
    "PairingCode",
    "ReadFailedError",
    "RetryPolicy",
    "SCHEMA_VERSION",
    "SchemaError",
    "SchemaTooNewError",
    "SearchHit",
    "SearchOwner",
    "SessionNotFoundError",
    "SessionRecord",
    "StorageError",
    "Store",
    "StoreClosedError",
    "TitleError",
    "TitleInUseError",
    "ToolCallRecord",
    "TurnEnd",
    "Usage",
    "UsageTotals",
    "WriteFailedError",
    "fault_of",
    "new_session_id",
]
