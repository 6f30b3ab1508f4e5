"""Which platform hint a new session's system prompt ends with.

The hint (what formatting renders on the platform, how long a message may be)
is the adapter's own ``platform_hint``, unless ``agent.platform_hints`` in
config.yaml replaces it for that platform (names compared in any case; ``""``
removes the hint). The agent gets the text and knows nothing of platforms.
"""

from __future__ import annotations

from collections.abc import Mapping

from adapters.contract import Adapter


class PlatformHints:
    def __init__(self, adapters: Mapping[str, Adapter], overrides: Mapping[str, str] | None = None) -> None:
        self._builtin = {platform.lower(): adapter.platform_hint for platform, adapter in adapters.items()}
        self._overrides = {name.strip().lower(): text.strip() for name, text in (overrides or {}).items()}

    def __call__(self, platform: str | None) -> str:
        """The hint for ``platform``: the configured one if any, else its adapter's; ``""`` for none."""
        if not platform:
            return ""
        key = platform.strip().lower()
        if key in self._overrides:
            return self._overrides[key]
        return self._builtin.get(key, "")
