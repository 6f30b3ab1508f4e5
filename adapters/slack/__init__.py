"""Slack: slack-bolt's asyncio app behind the adapter interface, in Socket Mode or over HTTP.

Importing this package imports slack_bolt and slack_sdk; the gateway does it
only when Slack is enabled.
"""

from adapters.slack.adapter import SlackAdapter

__all__ = ["SlackAdapter"]
