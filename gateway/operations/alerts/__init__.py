"""Operator alerts: a person is told when the gateway is down in part, and when it is well again.

``conditions`` judges what is wrong, ``monitor`` decides what is news and keeps its memory across
restarts, ``destinations`` keeps each destination to its hourly budget and queues the alert in the
outbox, ``webhook`` POSTs the alerts for webhooks, and ``texts`` says it all in words.
"""

from gateway.operations.alerts.monitor import Alerts

__all__ = ["Alerts"]
