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


@pytest.fixture(autouse=True)
def _redactor_secrets_restored() -> Iterator[None]:
    """Gateways and CLI commands run in-process add their configured secrets to the process-wide
    redactor; forget them after each test, or a later test's token is masked whole by an earlier
    test's configuration instead of by its shape (test_logs failed when run after test_secret_exits)."""
    from gateway.operations.redaction import redactor

    saved = list(redactor._secrets)
    yield
    redactor._secrets = saved
