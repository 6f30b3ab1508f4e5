"""The LLM agent: sessions that take turns with a model, its tools and long-term memory.

``from agent import Agent, AgentSettings, ...``: the names below are everything the gateway
(and ``bench.gateway``, which builds the agent as the gateway does) uses; the submodules are
the agent's own business (its tests and the agent benchmarks reach into them).

What the user of this package gives it (the gateway, built from the configuration in
``gateway/agent_factory.py``):

- :class:`AgentSettings`: the home folder (SOUL.md, memories/), the window and compression
  settings, the tool limits, the operator's system message and the platforms' hint texts.
- The models: a :class:`ModelRouter` of :class:`ModelTarget` s (a :class:`Provider` from
  :func:`make_provider`, a model name, its :func:`cache_policy`), and one for summaries.
- ``search``: a :data:`ScopedSearchFunction` over past conversations (the gateway's storage
  search); the agent never touches the database.
- ``media``: a :class:`MediaSource` the bytes of users' pictures and documents are read from
  (the home's media folder), by the ``sha256`` of each :class:`MediaPart`; whether the main model
  sees pictures is ``Agent.vision`` / ``AgentSession.vision`` (from ``ModelTarget.vision``, else
  :func:`vision_default`).
- Per session: its id, the platform as a plain name, whose memory it uses (a
  :class:`MemoryScope`), and its history as :class:`ChatMessage` s; the agent gives back the
  turn's messages, usage and any compaction (:class:`CompressionResult`) for the caller to store.

The package imports no platform library and nothing of storage, gateway or config
(``tests/architecture/rules.py`` holds it to that). The model SDKs are loaded only by
:func:`make_provider`, for the provider asked for.
"""

from agent.caching import CachePolicy, cache_policy
from agent.compressor import CompressionResult, ContextEngine
from agent.core import Agent, AgentSession, AgentSettings
from agent.errors import ErrorKind, ModelUnavailableError, ProviderError
from agent.media import ANTHROPIC_MAX_EDGE, ANTHROPIC_MAX_PIXELS, MediaPart, MediaSource, image_tokens, part_tokens, standin, vision_default
from agent.memory import LOCK_FILE as MEMORY_LOCK_FILE
from agent.memory import MemoryStore, MemoryTarget, make_private_dirs
from agent.memory_scopes import MemoryBank, MemoryScope, holds_legacy_memory, move_legacy
from agent.messages import ChatMessage, ToolCall
from agent.prompt import combine_ephemeral
from agent.providers import make_provider
from agent.providers.base import ModelRequest, ModelResponse, Provider
from agent.providers.router import ModelRouter, ModelTarget
from agent.tokens import estimate_message, estimate_text
from agent.tools import ScopedSearchFunction, Tool, ToolContext
from agent.usage import Price, PriceTable, Usage

__all__ = [
    "ANTHROPIC_MAX_EDGE",
    "ANTHROPIC_MAX_PIXELS",
    "Agent",
    "AgentSession",
    "AgentSettings",
    "CachePolicy",
    "ChatMessage",
    "CompressionResult",
    "ContextEngine",
    "ErrorKind",
    "MEMORY_LOCK_FILE",
    "MediaPart",
    "MediaSource",
    "MemoryBank",
    "MemoryScope",
    "MemoryStore",
    "MemoryTarget",
    "ModelRequest",
    "ModelResponse",
    "ModelRouter",
    "ModelTarget",
    "ModelUnavailableError",
    "Price",
    "PriceTable",
    "Provider",
    "ProviderError",
    "ScopedSearchFunction",
    "Tool",
    "ToolContext",
    "ToolCall",
    "Usage",
    "cache_policy",
    "combine_ephemeral",
    "estimate_message",
    "estimate_text",
    "holds_legacy_memory",
    "image_tokens",
    "make_private_dirs",
    "make_provider",
    "move_legacy",
    "part_tokens",
    "standin",
    "vision_default",
]
