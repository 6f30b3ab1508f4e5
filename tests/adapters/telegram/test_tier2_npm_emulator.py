"""Second tier: a DM round trip against the public npm emulator ``telegram-test-api@4.2.1``.

It is installed on first use into ``.cache/npm-telegram-test-api`` (gitignored)
and started from the test; without node/npm, with the npm registry out of reach,
or when the install fails, the test is skipped with the reason (see
:mod:`tests.adapters.npm_packages`). That emulator needs two shims, which live
here as an aiogram session middleware and never in the adapter: its getMe
lacks ``is_bot`` (aiogram refuses the answer), and its getUpdates answers at
once even with a timeout (a busy loop), so an empty answer is slowed down.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiogram import Bot
from aiogram.methods import GetMe, GetUpdates
from aiogram.types import User as TgUser

from adapters.telegram import TelegramAdapter
from tests.adapters.npm_packages import npm_install
from tests.adapters.telegram.conftest import StartTelegram
from tests.adapters.telegram.test_webhook import free_port
from tests.fakes.model_server import ModelServer, Text
from tests.gateway.processes import REPO
from tests.waiting import HANG_GUARD, eventually

pytestmark = pytest.mark.tier2

VERSION = "4.2.1"
CACHE = REPO / ".cache" / "npm-telegram-test-api"
TOKEN = "424242:npm-emulator-token"
START_SCRIPT = """
const TelegramServer = require('telegram-test-api');
const server = new TelegramServer({port: Number(process.env.PORT), host: '127.0.0.1', storeTimeout: 600});
server.start().then(() => console.log('listening'));
"""


def installed_package() -> Path:
    """The emulator's folder, installing it on first use; skips the test when that is not possible."""
    package = CACHE / "node_modules" / "telegram-test-api"
    manifest = package / "package.json"
    if manifest.exists() and json.loads(manifest.read_text())["version"] == VERSION:
        return package
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are needed for the telegram-test-api conformance test")
    npm_install(f"telegram-test-api@{VERSION}", CACHE)
    if not manifest.exists():
        pytest.skip(f"npm install telegram-test-api@{VERSION} left no {manifest.relative_to(CACHE)}")
    return package


async def shim(make_request: Any, bot: Bot, method: Any) -> Any:
    """Fill in what telegram-test-api lacks (see the module docstring)."""
    if isinstance(method, GetMe):
        return TgUser(id=bot.id, is_bot=True, first_name="Switchboard", username="switchboard_npm_bot")
    result = await make_request(bot, method)
    if isinstance(method, GetUpdates) and not result:
        await asyncio.sleep(0.2)  # the emulator does not long-poll: this stands in for the server's wait
    return result


def with_shims(adapter: TelegramAdapter) -> None:
    plain = adapter.new_bot

    def new_bot() -> Bot:
        bot = plain()
        bot.session.middleware(shim)
        return bot

    adapter.new_bot = new_bot  # type: ignore[method-assign]


async def test_dm_round_trip_against_telegram_test_api(start_telegram: StartTelegram, model_server: ModelServer) -> None:
    package = installed_package()
    port = free_port()
    (CACHE / "start.js").write_text(START_SCRIPT, encoding="utf-8")
    node = await asyncio.create_subprocess_exec(
        "node", str(CACHE / "start.js"), cwd=package.parent.parent, env={"PORT": str(port), "PATH": "/usr/bin:/bin"},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    run = None
    try:
        assert node.stdout is not None
        line = await asyncio.wait_for(node.stdout.readline(), HANG_GUARD)
        assert b"listening" in line, line
        base = f"http://127.0.0.1:{port}"
        model_server.responder = lambda record: Text("npm says: " + record.last_user_text)
        run = await start_telegram(
            telegram={"token": TOKEN, "api_base_url": base, "allowed_users": ["777"]}, tune=with_shims
        )

        user_message = {
            "botToken": TOKEN, "date": 1_700_000_000, "text": "hello npm",
            "from": {"id": 777, "first_name": "Nia", "username": "nia", "is_bot": False},
            "chat": {"id": 777, "first_name": "Nia", "username": "nia", "type": "private"},
        }  # fmt: skip
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{base}/sendMessage", json=user_message) as response:
                assert response.status == 200

            async def answered() -> list[Any] | None:
                async with http.post(f"{base}/getUpdatesHistory", json={"token": TOKEN}) as response:
                    history = (await response.json())["result"]
                done = "npm says: hello npm" in json.dumps(history) and not await run.store.outbox_pending()
                return history if done else None

            history = await eventually(answered, "the reply in the emulator's history", interval=0.1)
        assert json.dumps(history).count("npm says: hello npm") == 1
        with closing(sqlite3.connect(run.loaded.db_path)) as db:
            assert db.execute("SELECT status FROM outbox").fetchall() == [("sent",)]
    finally:
        if run is not None:
            await run.gateway.shutdown()
        node.kill()
        await node.wait()
