"""Slack: slack-bolt's asyncio app behind the adapter interface, in Socket Mode or over HTTP.

The adapter (and with it slack_bolt and slack_sdk) is imported on first use of
``SlackAdapter``: the gateway does it only when Slack is enabled, and the doctor's
token check (:mod:`.probe`) never does.
"""

__all__ = ["SlackAdapter"]


def __getattr__(name: str) -> object:
    # Imported on first use, so the doctor's token check (``probe.py``) does not load slack-bolt.
    if name in __all__:
        from adapters.slack import adapter

        return getattr(adapter, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
