"""The adapter contract: everything that crosses between a platform adapter and the gateway.

:mod:`.events` holds the messages (inbound, outbound, attachments, chat types,
markup dialects, the command menu), :mod:`.buttons` buttons under a message and their presses, :mod:`.errors` what an adapter raises and
how it translates its platform's exceptions, :mod:`.adapter` the
:class:`Adapter` base class (and, in its docstring, what a new platform must
provide) with its capabilities, status and access settings, and
:mod:`.rejections` how an inbound event that cannot be read is logged, and
:mod:`.streaming` how a reply is shown while it is written and how fast a platform
may be written to, :mod:`.liveness` how a quiet connection is checked and what it
missed is fetched again, and :mod:`.receiving` the right to hold a receiving connection
that only one process may hold.

Dependencies point one way: the gateway imports this package; adapters import
it and nothing of the gateway.
"""

from adapters.contract.adapter import (
    AccessPolicy,
    Adapter,
    AdapterState,
    AdapterStatus,
    Capabilities,
    Intake,
    Probe,
    Where,
)
from adapters.contract.buttons import BUTTON_ID, Button, ButtonListener, ButtonPress
from adapters.contract.errors import (
    AdapterError,
    Attempt,
    DeliveryError,
    MarkupRejected,
    MediaUnavailable,
    RateLimited,
    RecipientUnavailable,
    StreamingUnsupported,
    TransientDeliveryError,
    Translate,
    translated,
)
from adapters.contract.events import (
    Attachment,
    ChatType,
    CommandMenu,
    InboundMessage,
    Markup,
    MenuCommand,
    OutboundMessage,
    storable_text,
)
from adapters.contract.liveness import CatchUpPoint, CatchUpWindow, GapListener, Liveness
from adapters.contract.receiving import Ownership
from adapters.contract.rejections import log_rejected, rejection_reason
from adapters.contract.streaming import Rate, RateLimits, StreamMode

__all__ = [
    "AccessPolicy",
    "Adapter",
    "AdapterError",
    "AdapterState",
    "AdapterStatus",
    "Attachment",
    "Attempt",
    "BUTTON_ID",
    "Button",
    "ButtonListener",
    "ButtonPress",
    "Capabilities",
    "CatchUpPoint",
    "CatchUpWindow",
    "ChatType",
    "CommandMenu",
    "DeliveryError",
    "GapListener",
    "InboundMessage",
    "Intake",
    "Liveness",
    "Markup",
    "MarkupRejected",
    "MediaUnavailable",
    "MenuCommand",
    "OutboundMessage",
    "Ownership",
    "Probe",
    "Rate",
    "RateLimited",
    "RateLimits",
    "RecipientUnavailable",
    "StreamMode",
    "StreamingUnsupported",
    "TransientDeliveryError",
    "Translate",
    "Where",
    "log_rejected",
    "rejection_reason",
    "storable_text",
    "translated",
]
