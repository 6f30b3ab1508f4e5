"""Building the agent from the configuration: providers, routers, settings.

The model SDKs are loaded by :func:`agent.make_provider` when the gateway actually
runs, never by commands that only read the configuration.
"""

from __future__ import annotations

from pathlib import Path

from agent import (
    Agent,
    AgentSettings,
    MediaSource,
    ModelRouter,
    ModelTarget,
    Price,
    PriceTable,
    ScopedSearchFunction,
    cache_policy,
    make_provider,
)
from config.loader import LoadedConfig
from gateway.media.tool_pictures import ToolPictures
from storage import MediaFolder


def _target(
    kind: str, name: str, api_key: str | None, base_url: str | None, timeout: float, vision: bool | None = None
) -> ModelTarget:
    """One model; ``vision`` as configured (None: the built-in table by its name)."""
    provider = make_provider(kind, api_key=api_key, base_url=base_url, timeout=timeout)
    return ModelTarget(provider, name, cache_policy(kind, name, base_url), vision)


def build_routers(loaded: LoadedConfig) -> tuple[ModelRouter, ModelRouter]:
    """The main router (model, then its fallbacks) and the summary router (auxiliary model, then main)."""
    m = loaded.settings.model
    main = _target(m.provider, m.name, m.api_key, m.base_url, m.timeout, m.vision)
    fallbacks = [_target(f.provider, f.name, f.api_key, f.base_url, m.timeout, f.vision) for f in m.fallbacks]
    aux = loaded.settings.auxiliary.compression
    if aux.model or aux.provider or aux.base_url:
        kind = aux.provider or m.provider
        summary_first = _target(kind, aux.model or m.name, aux.api_key or m.api_key, aux.base_url or m.base_url, m.timeout)
        summary = ModelRouter([summary_first, main])
    else:
        summary = ModelRouter([main])
    return ModelRouter([main, *fallbacks]), summary


def asking_time(loaded: LoadedConfig) -> float:
    """Seconds a tool call may spend waiting for the person's answer before it runs (``tools.confirm_timeout``
    when a server's tools ask first, else 0): the agent's limit on a call (``agent.tool_timeout``) is for
    running it, so the wait comes on top, and an unanswered question ends as "nobody answered", not as a
    tool that timed out."""
    tools = loaded.settings.tools
    asks = any(server.enabled and server.confirm for server in tools.mcp_servers)
    return tools.confirm_timeout if asks else 0.0


def build_agent(
    loaded: LoadedConfig, *, search: ScopedSearchFunction | None = None, media: MediaSource | None = None
) -> Agent:
    """The agent; ``media`` is where it reads the bytes of users' pictures and documents (default: the
    home's media folder, ``LoadedConfig.media_dir``, where the gateway's media pipeline keeps them). The
    pictures tools return are kept in the home's media folder, downscaled as users' photos are."""
    s = loaded.settings
    router, summary_router = build_routers(loaded)
    prices = PriceTable({name: Price(p.input, p.output, p.cache_read, p.cache_write) for name, p in s.model.prices.items()})
    settings = AgentSettings(
        home=loaded.home,
        context_length=s.model.context_length,
        compression_enabled=s.compression.enabled,
        threshold=s.compression.threshold,
        target_ratio=s.compression.target_ratio,
        protect_last_n=s.compression.protect_last_n,
        cache_ttl=s.model.cache_ttl,
        max_tokens=s.model.max_tokens,
        max_iterations=s.agent.max_iterations,
        tool_timeout=s.agent.tool_timeout + asking_time(loaded),
        system_message=s.agent.system_message,
        workdir=Path(s.agent.workdir).expanduser() if s.agent.workdir else None,
    )
    folder = MediaFolder(loaded.media_dir)
    media = media if media is not None else folder
    pictures = ToolPictures(folder, max_pixels=int(s.media.limits.image_megapixels * 1e6))
    return Agent(settings, router, summary_router=summary_router, search=search, prices=prices, media=media,
                 pictures=pictures)  # fmt: skip
