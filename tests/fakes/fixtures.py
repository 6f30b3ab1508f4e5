"""Session-wide fixtures for the local protocol peers (model server, platform emulators, PostgreSQL server)."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio

from tests.fakes.model_server import ModelServer
from tests.fakes.other_site import OtherSite
from tests.fakes.postgres_server import PostgresServer, PostgresUnavailable
from tests.fakes.relay_platform import RelayPlatform
from tests.fakes.slack_api import FakeSlack
from tests.fakes.telegram_api import TelegramAPI


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


@pytest_asyncio.fixture
async def telegram_api() -> AsyncIterator[TelegramAPI]:
    """The Telegram Bot API emulator, fresh for this test."""
    api = TelegramAPI()
    await api.start()
    try:
        yield api
    finally:
        await api.stop()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def fake_slack_session() -> AsyncIterator[FakeSlack]:
    """The fake Slack (Web API, Socket Mode), started once for the whole test session."""
    api = FakeSlack()
    await api.start()
    try:
        yield api
    finally:
        await api.stop()


@pytest_asyncio.fixture
async def fake_slack(fake_slack_session: FakeSlack) -> AsyncIterator[FakeSlack]:
    """The session's fake Slack, reset to a clean state for this test."""
    await fake_slack_session.close_sockets()
    fake_slack_session.reset()
    yield fake_slack_session
    await fake_slack_session.close_sockets()


@pytest_asyncio.fixture
async def other_site() -> AsyncIterator[OtherSite]:
    """Another site (127.0.0.2) where no download may lead and no credential may go, fresh for this test."""
    site = OtherSite()
    await site.start()
    try:
        yield site
    finally:
        await site.stop()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server of the machine's own binaries, started when a test first asks for it and shared by
    the whole session; the test is skipped (saying where the binaries were looked for) where there are none."""
    yield from own_postgres()


def own_postgres() -> Iterator[PostgresServer]:
    """Start a PostgreSQL server and yield it, stopped after; the test is skipped where the machine has no binaries.
    For a fixture of a test that stops its server (``pause``) and must disturb no other test's database."""
    try:
        server = PostgresServer()
    except PostgresUnavailable as missing:
        pytest.skip(str(missing))
    server.start()
    try:
        yield server
    finally:
        server.stop()


_databases = itertools.count(1)


@pytest.fixture
def postgres_dsn(postgres: PostgresServer) -> Iterator[str]:
    """The URL of a new empty database on the session's PostgreSQL server, dropped after this test."""
    name = f"test_{next(_databases)}"
    dsn = postgres.create_database(name)
    yield dsn
    postgres.drop_database(name)
