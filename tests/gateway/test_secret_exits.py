"""No secret leaves the process: every exit is planted with every kind of secret and its output grepped.

An exit is a way text leaves Switchboard for someone to read: /health, /metrics, a reply in a
chat, the output of ``doctor``, ``check``, ``backup`` and ``restore``, a backup's MANIFEST.json.
Each one is driven through the real path (the real gateway with the real aiogram adapter against
the Telegram emulator, the real CLI as a subprocess) with every kind of secret configured, the
way an operator configures them (the environment), and planted in an error (or, where no error
reaches that exit, in the only text that does). Adding a kind of secret is one line in
``SECRETS``; adding an exit is one function and one line in ``EXITS``.

The last test plants the same secrets inline in config.yaml and greps what ``backup`` writes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
import yaml

from config import load_config
from config.plan import build_plan
from gateway.adapter_loader import load_adapters
from gateway.agent_factory import build_agent
from gateway.app import Gateway
from gateway.operations.redaction import MASK
from gateway.runner import search_function
from storage import Store
from tests.fakes.model_server import ModelServer, Text
from tests.fakes.telegram_api import Failure, TelegramAPI, User
from tests.gateway.conftest import write_config
from tests.gateway.processes import switchboard
from tests.waiting import eventually

HANG_GUARD = 60.0
ALICE = User(id=1001, first_name="Alice")


@dataclass(frozen=True)
class Secret:
    value: str
    variable: str
    """The environment variable an operator puts it in (and a masked config.yaml refers to)."""
    path: str
    """Its key in config.yaml, for the inline case."""


SECRETS: dict[str, Secret] = {
    "telegram bot token": Secret("7512345678:AAHk3dY9kq_Zx8Yv7Wf6mN5bL4cK3jH2gF1", "TELEGRAM_BOT_TOKEN", "platforms.telegram.token"),
    "slack bot token": Secret("xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUvWx", "SLACK_BOT_TOKEN", "platforms.slack.bot_token"),
    "slack app token": Secret("xapp-1-A012BCDEF-1234567890123-abcdef0123456789", "SLACK_APP_TOKEN", "platforms.slack.app_token"),
    # No recognisable shape: only the net of configured secrets catches it.
    "slack signing secret": Secret("8f14e45fceea167a5a36dedd4bea2543", "SLACK_SIGNING_SECRET", "platforms.slack.signing_secret"),
    "discord bot token": Secret("MTIzNDU2Nzg5MDEyMzQ1Njc4.GAbCdE.aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456", "DISCORD_BOT_TOKEN", "platforms.discord.token"),
    "anthropic api key": Secret("sk-ant-api03-Qw3rTy7UiOp-AsDfGhJkL_ZxCvBnM", "ANTHROPIC_API_KEY", "model.api_key"),
    "openai api key": Secret("sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34", "OPENAI_API_KEY", "model.fallbacks.0.api_key"),
}  # fmt: skip
ENVIRONMENT = {secret.variable: secret.value for secret in SECRETS.values()}
PLANTED = "the upstream answered with an error naming " + " and ".join(s.value for s in SECRETS.values())


@dataclass
class Scene:
    """One test's surroundings: a home, the Telegram emulator holding the bot token, the model server."""

    tmp: Path
    model: ModelServer
    telegram: TelegramAPI

    @property
    def home(self) -> Path:
        return self.tmp / "home"

    def configure(self, home: Path | None = None, **telegram: Any) -> Path:
        """config.yaml with every platform configured (only Telegram on) and no secret in it."""
        return write_config(home or self.home, self.model, {
            "model": {"api_key": None, "fallbacks": [{"provider": "openai", "name": "gpt-4o-mini",
                                                      "base_url": f"{self.model.base_url}/v1"}]},
            "platforms": {
                "telegram": {"api_base_url": self.telegram.base_url, "allowed_users": [str(ALICE.id)],
                             "poll_timeout": 1, "stall_timeout": 30, **telegram},
                "slack": {"enabled": False},
                "discord": {"enabled": False},
            },
        })  # fmt: skip

    async def cli(self, *args: str, home: Path | None = None) -> str:
        """Everything a ``switchboard`` command printed (in a thread: the emulator keeps answering)."""
        done = await asyncio.to_thread(switchboard, *args, home=home or self.home, **ENVIRONMENT)
        return done.stdout + done.stderr

    @asynccontextmanager
    async def gateway(self) -> AsyncIterator[Gateway]:
        """The real gateway with the real Telegram adapter, built as ``switchboard run`` builds it."""
        loaded = load_config(self.configure(), {"SWITCHBOARD_HOME": str(self.home), **ENVIRONMENT}, create_home=True)
        store = await Store.open(loaded.db_path)
        gateway = Gateway(loaded, store, load_adapters(build_plan(loaded).enabled, loaded),
                          build_agent(loaded, search=search_function(store)))  # fmt: skip
        await gateway.start()
        try:
            yield gateway
        finally:
            await gateway.shutdown()

    async def planted_home(self) -> Path:
        """A home whose path carries every secret (one directory each), with a config and a database."""
        home = self.tmp.joinpath("homes", *(secret.value for secret in SECRETS.values()), "home")
        self.configure(home)
        await (await Store.open(home / "state.db")).close()
        return home


@pytest_asyncio.fixture
async def scene(tmp_path: Path, model_server: ModelServer) -> AsyncIterator[Scene]:
    telegram = TelegramAPI(token=SECRETS["telegram bot token"].value)
    await telegram.start()
    try:
        yield Scene(tmp_path, model_server, telegram)
    finally:
        await telegram.stop()


async def fetch(url: str) -> str:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return await response.text()


# -- the exits ---------------------------------------------------------------------------------------


async def health_body(scene: Scene) -> str:
    """getUpdates answered by a broken proxy whose error page echoes the path (/bot<token>/getUpdates)."""
    scene.telegram.fail("getUpdates", *[Failure.broken_proxy(502, PLANTED)] * 5)
    async with scene.gateway() as gateway:
        assert gateway.health_url
        url = gateway.health_url

        async def failing() -> str | None:
            body = await fetch(url)
            return body if "getUpdates failed" in body else None

        return await eventually(failing, "/health to say getUpdates failed", timeout=HANG_GUARD)


async def metrics_page(scene: Scene) -> str:
    """No label carries error text today; one is planted so that a future one is caught."""
    async with scene.gateway() as gateway:
        assert gateway.health_url
        gateway.metrics.errors.inc(PLANTED)
        return await fetch(gateway.health_url.replace("/health", "/metrics"))


async def chat_reply(scene: Scene) -> str:
    """A model's answer quoting an error it was shown (a tool's failure, a pasted log)."""
    scene.model.responder = lambda record: Text(f"The call failed: {PLANTED}")
    async with scene.gateway():
        await scene.telegram.say(ALICE, "what went wrong?")
        [reply] = await scene.telegram.wait_sent(1, timeout=HANG_GUARD)
    return f"{reply.text}\n{reply.visible}"


async def doctor_output(scene: Scene) -> str:
    """Telegram's getMe failing with an error that names every secret."""
    scene.configure()
    scene.telegram.fail("getMe", Failure(500, PLANTED))
    return await scene.cli("doctor")


async def check_output(scene: Scene) -> str:
    """A config error that quotes the bad value (every secret pasted into the wrong key)."""
    scene.configure(mode=PLANTED)
    return await scene.cli("check")


async def backup_output(scene: Scene) -> str:
    home = await scene.planted_home()
    return await scene.cli("backup", str(scene.tmp / "backups"), home=home)


async def backup_manifest(scene: Scene) -> str:
    home = await scene.planted_home()
    await scene.cli("backup", str(scene.tmp / "backups"), home=home)
    (made,) = (scene.tmp / "backups").iterdir()
    return (made / "MANIFEST.json").read_text(encoding="utf-8")


async def restore_output(scene: Scene) -> str:
    home = await scene.planted_home()
    await scene.cli("backup", str(scene.tmp / "backups"), home=home)
    (made,) = (scene.tmp / "backups").iterdir()
    return await scene.cli("restore", str(made), home=home)


EXITS: dict[str, Callable[[Scene], Awaitable[str]]] = {
    "/health": health_body,
    "/metrics": metrics_page,
    "chat reply": chat_reply,
    "switchboard doctor": doctor_output,
    "switchboard check": check_output,
    "switchboard backup": backup_output,
    "backup MANIFEST.json": backup_manifest,
    "switchboard restore": restore_output,
}


@pytest.mark.parametrize("exit_name", EXITS)
async def test_no_kind_of_secret_leaves_through(scene: Scene, exit_name: str) -> None:
    text = await EXITS[exit_name](scene)
    leaked = [kind for kind, secret in SECRETS.items() if secret.value in text]
    assert leaked == [], f"{exit_name} shows: {text[:2000]}"
    assert MASK in text, f"nothing was planted in {exit_name}'s output: {text[:2000]}"


async def test_a_reply_keeps_code_that_merely_looks_like_a_secret_assignment(scene: Scene) -> None:
    """Replies are masked for credentials (configured, or shaped like one), not for words like ``api_key =``."""
    example = 'client = OpenAI(api_key=os.environ["OPENAI_API_KEY"])  # password: see-the-vault-entry'
    scene.model.responder = lambda record: Text(f"{example}\nYour bot token is {SECRETS['telegram bot token'].value}")
    async with scene.gateway():
        await scene.telegram.say(ALICE, "show me")
        [reply] = await scene.telegram.wait_sent(1, timeout=HANG_GUARD)
    assert example in reply.visible
    assert SECRETS["telegram bot token"].value not in reply.text and MASK in reply.visible


def set_key(document: dict[str, Any], dotted: str, value: str) -> None:
    """Set ``a.b.0.c`` in a parsed YAML document (a number steps into a list)."""
    *parents, last = dotted.split(".")
    node: Any = document
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    node[last] = value


async def test_backup_masks_secrets_written_inline_in_config_yaml_and_restore_brings_them_back(scene: Scene) -> None:
    path = scene.configure()
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    for secret in SECRETS.values():
        set_key(document, secret.path, secret.value)
    path.write_text("# kept: a comment the operator wrote\n" + yaml.safe_dump(document), encoding="utf-8")
    await (await Store.open(scene.home / "state.db")).close()

    done = await asyncio.to_thread(switchboard, "backup", str(scene.tmp / "backups"), home=scene.home)
    assert done.returncode == 0, done.stderr
    (made,) = (scene.tmp / "backups").iterdir()
    written = {str(p.relative_to(made)): p.read_bytes() for p in made.rglob("*") if p.is_file()}
    leaked = [(kind, name) for kind, s in SECRETS.items() for name, data in written.items() if s.value.encode() in data]
    assert leaked == []
    copy = written["config.yaml"].decode()
    assert copy.startswith("# kept: a comment the operator wrote\n")
    masked = {secret.path: secret.variable for secret in SECRETS.values()}
    assert json.loads(written["MANIFEST.json"])["masked_secrets"]["config.yaml"] == masked
    for secret in SECRETS.values():
        assert f"${{{secret.variable}}}" in copy
        assert f"{secret.path} -> ${{{secret.variable}}}" in done.stdout
    assert ".env" in done.stdout

    fresh = scene.tmp / "fresh"  # a new machine: no config.yaml yet, the secrets in its environment
    fresh.mkdir(mode=0o700)
    restored = await asyncio.to_thread(switchboard, "restore", str(made), home=fresh, **ENVIRONMENT)
    assert restored.returncode == 0, restored.stderr
    assert "config.yaml   restored" in restored.stdout
    assert all(secret.variable in restored.stdout for secret in SECRETS.values())
    before = load_config(path, {"SWITCHBOARD_HOME": str(scene.home)})
    after = load_config(fresh / "config.yaml", {"SWITCHBOARD_HOME": str(fresh), **ENVIRONMENT})
    assert after.secrets() == before.secrets()
    assert after.settings == before.settings
