"""Run the gateway against the public local-slack emulator; meant to run inside ``unshare -n``.

local-slack binds 0.0.0.0 with no way to choose, so the tier-2 test starts
this script in a network namespace that has only loopback; the emulator, the
fake model server and the gateway all live in it. The script prints one JSON
line with what the emulator saw and exits 0, or prints the failure and exits 1.

    unshare -n sh -c 'ip link set lo up && exec python -m tests.adapters.slack.local_slack_driver \
        --binary …/local-slack --mode socket --workdir /tmp/x'
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from tests.waiting import eventually

EMULATOR_PORT = 9031
EVENTS_PORT = 4000
BOT_USER = "U0BOT"
ALICE = "U01ALICE"
CHANNEL = "C01GEN"
SECRET = "test-signing-secret"
WAIT = 30.0
"""Seconds any one step may take before the run is declared hung."""


def emulator_config(mode: str) -> dict[str, Any]:
    app: dict[str, Any] = {
        "appId": "A01APP", "botUserId": BOT_USER, "botName": "switchbot", "botToken": "xoxb-test-token",
        "appToken": "xapp-test-token", "signingSecret": SECRET, "mode": mode,
    }  # fmt: skip
    if mode == "events":
        app["requestUrl"] = f"http://127.0.0.1:{EVENTS_PORT}/slack/events"
    return {
        "workspace": {"name": "Test Workspace", "domain": "test", "teamId": "T01TEST"},
        "app": app,
        "users": [{"id": ALICE, "name": "alice", "real_name": "Alice Anderson"}],
        "channels": [{"id": CHANNEL, "name": "general", "members": [ALICE, BOT_USER]}],
    }


async def until(check: Callable[[], Awaitable[Any]], what: str) -> Any:
    """Ask ``check`` until it returns something truthy (a refused connection counts as not yet); fail after
    :data:`WAIT` seconds."""

    async def answered() -> Any:
        try:
            return await check()
        except aiohttp.ClientError:
            return None

    return await eventually(answered, what, timeout=WAIT, interval=0.1)


class Emulator:
    def __init__(self, session: aiohttp.ClientSession) -> None:
        self._http = session
        self.base = f"http://127.0.0.1:{EMULATOR_PORT}"

    async def get(self, path: str) -> Any:
        async with self._http.get(self.base + path) as response:
            return await response.json() if response.status == 200 else None

    async def user_says(self, channel: str, text: str, thread_ts: str | None = None) -> dict[str, Any]:
        body = {"channel": channel, "user": ALICE, "text": text, **({"thread_ts": thread_ts} if thread_ts else {})}
        async with self._http.post(self.base + "/_control/message", json=body) as response:
            data = await response.json()
        assert data.get("ok"), data
        return data["message"]

    async def bot_reply(self, channel: str, after_ts: str) -> dict[str, Any]:
        async def check() -> dict[str, Any] | None:
            data = await self.get(f"/_control/messages/{channel}")
            for item in (data or {}).get("messages", []):
                replies = [item, *item.get("replies", [])] if isinstance(item.get("replies"), list) else [item]
                for candidate in replies:
                    if candidate.get("user") == BOT_USER and float(candidate["ts"]) > float(after_ts):
                        return candidate
            return None

        return await until(check, f"the bot's reply in {channel}")


async def run(binary: str, mode: str, workdir: Path) -> dict[str, Any]:
    from config import load_config
    from config.plan import build_plan
    from gateway.adapter_loader import load_adapters
    from gateway.agent_factory import build_agent
    from gateway.app import Gateway
    from gateway.runner import search_function
    from storage import Store
    from tests.fakes.model_server import ModelServer
    from tests.gateway.conftest import write_config

    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "local-slack.yaml").write_text(yaml.safe_dump(emulator_config(mode)), encoding="utf-8")
    log = (workdir / "local-slack.log").open("wb")
    emulator_process = subprocess.Popen(
        [binary, "--config", str(workdir / "local-slack.yaml"), "--port", str(EMULATOR_PORT), "--base-host", "127.0.0.1"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    model = ModelServer()
    gateway = None
    try:
        async with aiohttp.ClientSession() as session:
            emulator = Emulator(session)
            await until(lambda: emulator.get("/_control/state"), "local-slack to start")
            await model.start()
            slack = {
                "enabled": True, "bot_token": "xoxb-test-token", "app_token": "xapp-test-token", "signing_secret": SECRET,
                "mode": "socket" if mode == "socket" else "http", "api_base_url": f"{emulator.base}/api/",
                "http_listen": {"host": "127.0.0.1", "port": EVENTS_PORT, "path": "/slack/events"},
                "allowed_users": [ALICE],
            }  # fmt: skip
            home = workdir / "home"
            loaded = load_config(write_config(home, model, {"platforms": {"slack": slack}}),
                                 {"SWITCHBOARD_HOME": str(home)}, create_home=True)  # fmt: skip
            adapters = load_adapters(build_plan(loaded).enabled, loaded)
            store = await Store.open(loaded.db_path)
            gateway = Gateway(loaded, store, adapters, build_agent(loaded, search=search_function(store)))
            if await gateway.start() != 1:
                raise RuntimeError(f"the Slack adapter did not start: {adapters[0].status()}")
            await until(lambda: _running(adapters[0]), "the adapter to be running")

            root = await emulator.user_says(CHANNEL, f"<@{BOT_USER}> hello emulator")
            mention_reply = await emulator.bot_reply(CHANNEL, root["ts"])
            dm = await emulator.user_says(ALICE, "hello in private")
            dm_reply = await emulator.bot_reply(dm["channel"], dm["ts"])
            traffic = await emulator.get("/_control/log")
            return {
                "mode": mode,
                "root_ts": root["ts"],
                "mention_reply": mention_reply,
                "dm_channel": dm["channel"],
                "dm_reply": dm_reply,
                "model_requests": len(model.requests),
                "web_api_calls": [e.get("summary") for e in traffic["log"] if e.get("kind") == "web_api"],
            }
    finally:
        if gateway is not None:
            await gateway.shutdown()
        await model.stop()
        emulator_process.terminate()
        emulator_process.wait(timeout=10)
        log.close()


async def _running(adapter: Any) -> bool:
    return adapter.status().state.value == "running"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--mode", choices=["socket", "events"], required=True)
    parser.add_argument("--workdir", type=Path, required=True)
    args = parser.parse_args()
    try:
        result = asyncio.run(run(args.binary, args.mode, args.workdir))
    except Exception as error:  # noqa: BLE001 - the test reads the reason from stderr
        print(f"local-slack run failed: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
