"""Shared test setup. Fixture plugins live in tests/fakes/ and are registered here."""

from collections.abc import Iterator

import pytest
import structlog

pytest_plugins = ["tests.fakes.fixtures"]


@pytest.fixture(autouse=True)
def _structlog_config_restored() -> Iterator[None]:
    """CLI commands run in-process configure structlog for a short-lived process; undo that after each test."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)
