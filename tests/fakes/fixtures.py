"""Session-wide fixtures for the local protocol peers (model server, platform emulators)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio

from tests.fakes.model_server import ModelServer
from tests.fakes.relay_platform import RelayPlatform


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def model_server_session() -> AsyncIterator[ModelServer]:
    """The fake model server, started once for the whole test session."""
    server = ModelServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
def model_server(model_server_session: ModelServer) -> Iterator[ModelServer]:
    """The session's fake model server, reset to a clean state for this test."""
    model_server_session.reset()
    yield model_server_session


@pytest_asyncio.fixture
async def relay() -> AsyncIterator[RelayPlatform]:
    """The out-of-process test platform (``--relay URL`` of ``tests.fakes.run_gateway``)."""
    platform = RelayPlatform()
    await platform.start()
    try:
        yield platform
    finally:
        await platform.stop()
