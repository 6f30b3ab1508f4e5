"""Shared test setup. Fixture plugins live in tests/fakes/ and are registered here."""

from collections.abc import Iterator

import pytest
import structlog

pytest_plugins = ["tests.fakes.fixtures"]


@pytest.fixture(autouse=True)
def _structlog_config_restored() -> Iterator[None]:
    """CLI commands and gateways run in-process configure structlog; undo that after each test."""
    saved = structlog.get_config()
    processors = list(saved["processors"])
    yield
    # configure_logging changes the processor list in place (loggers cached on first use keep it):
    # put its contents back in place too.
    saved["processors"][:] = processors
    structlog.configure(**saved)
