"""Inbound: what happens to a platform's message before any turn runs.

``intake`` stores each event (dedup on the platform's id) and checks who may talk (``access``,
``pairing``); ``session_key`` says which session it belongs to; ``lanes`` keeps one queue per
session so its messages are handled in order; ``ledger`` is the one place that says an event is done.
"""
