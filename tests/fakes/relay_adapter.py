"""The adapter for :mod:`tests.fakes.relay_platform`, run inside a real gateway process.

It behaves like a careful long-polling bot: each update is handed to the
gateway's intake and the offset moves past it only once the intake returned
(the event is then in the durable inbox), so an update is acknowledged to the
platform only after it is stored. After a crash the platform serves the
unacknowledged updates again and the inbox recognises the ones it already
has. Sends carry the chunk's ``nonce``, which the platform uses to drop a
chunk sent again after a crash between sending it and recording it as sent.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import aiohttp
import structlog

from adapters.contract import (
    Adapter,
    AdapterState,
    Capabilities,
    ChatType,
    DeliveryError,
    InboundMessage,
    Intake,
    Markup,
    OutboundMessage,
    RateLimited,
    StreamMode,
    TransientDeliveryError,
)
from tests.fakes.adapter import UNHURRIED

log = structlog.get_logger("adapters.relay")

SEND_TIMEOUT = aiohttp.ClientTimeout(total=10)


class RelayAdapter(Adapter):
    """Long-polls ``GET /updates`` and sends with ``POST /send`` on the relay platform at ``base_url``."""

    platform = "relay"
    capabilities = Capabilities(max_message_length=4096, length_unit="chars", can_edit=False, markup=Markup.PLAIN,
                                rates=UNHURRIED)  # fmt: skip

    def __init__(self, base_url: str, *, poll_timeout: float = 1.0, retry_delay: float = 0.2) -> None:
        super().__init__()
        self._base_url = base_url.rstrip("/")
        self._poll_timeout = poll_timeout
        self._retry_delay = retry_delay
        self._offset = 0
        self._session: aiohttp.ClientSession | None = None
        self._intake: Intake | None = None
        self._poller: asyncio.Task[None] | None = None
        self._waiting_for_updates = False
        self._stopping = False

    async def start(self, intake: Intake) -> None:
        self._intake = intake
        self._session = aiohttp.ClientSession()
        self._poller = asyncio.create_task(self._poll(), name="relay:poll")
        self._set_state(AdapterState.RUNNING, f"long polling {self._base_url}")

    async def stop_intake(self) -> None:
        """Finish the update being handed over, stop polling, and acknowledge what was stored."""
        task, self._poller = self._poller, None
        if task is None:
            return
        self._stopping = True
        if self._waiting_for_updates:
            task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        with contextlib.suppress(aiohttp.ClientError, TimeoutError):
            await self._get_updates(timeout=0, limit=1)  # only to acknowledge; what comes back stays unacknowledged
        self._set_state(AdapterState.STOPPING, "intake stopped")

    async def close(self) -> None:
        await self.stop_intake()
        session, self._session = self._session, None
        if session is not None:
            await session.close()
        self._set_state(AdapterState.STOPPED)

    async def send(self, message: OutboundMessage) -> str:
        if self._session is None:
            raise TransientDeliveryError("the relay adapter is not connected")
        payload = {"chat_id": message.chat_id, "text": message.text, "reply_to": message.reply_to,
                   "nonce": message.nonce}  # fmt: skip
        try:
            async with self._session.post(f"{self._base_url}/send", json=payload, timeout=SEND_TIMEOUT) as response:
                if response.status == 429:
                    raise RateLimited(float(response.headers.get("Retry-After", "1")))
                if response.status >= 500:
                    raise TransientDeliveryError(f"relay answered {response.status}")
                if response.status >= 400:
                    raise DeliveryError(f"relay refused the message: {await response.text()}")
                body = await response.json()
        except (aiohttp.ClientError, TimeoutError) as error:
            raise TransientDeliveryError(f"relay unreachable: {error!r}") from error
        return str(body["message_id"])

    async def edit(self, chat_id: str, message_id: str, text: str, *, markup: Markup = Markup.PLAIN) -> None:
        if self._session is None:
            raise TransientDeliveryError("the relay adapter is not connected")
        payload = {"chat_id": chat_id, "message_id": message_id, "text": text}
        try:
            async with self._session.post(f"{self._base_url}/edit", json=payload, timeout=SEND_TIMEOUT) as response:
                if response.status >= 500:
                    raise TransientDeliveryError(f"relay answered {response.status}")
                if response.status >= 400:
                    raise DeliveryError(f"relay refused the edit: {await response.text()}")
        except (aiohttp.ClientError, TimeoutError) as error:
            raise TransientDeliveryError(f"relay unreachable: {error!r}") from error

    def stream_modes(self, chat_type: ChatType, thread_id: str | None = None) -> tuple[StreamMode, ...]:
        return (StreamMode.EDIT,) if self.capabilities.can_edit else ()

    async def _poll(self) -> None:
        while not self._stopping:
            try:
                self._waiting_for_updates = True
                try:
                    updates = await self._get_updates(timeout=self._poll_timeout)
                finally:
                    self._waiting_for_updates = False
            except (aiohttp.ClientError, TimeoutError, ValueError) as error:
                self._set_state(AdapterState.DEGRADED, f"polling failed: {error!r}")
                log.warning("relay.poll_failed", error=repr(error))
                await asyncio.sleep(self._retry_delay)
                continue
            self._set_state(AdapterState.RUNNING, f"long polling {self._base_url}")
            for update in updates:
                if self._stopping or not await self._hand_over(update):
                    break
                self._offset = int(update["update_id"]) + 1

    async def _hand_over(self, update: dict[str, Any]) -> bool:
        """Give one update to the gateway; True once it is stored (only then is it acknowledged)."""
        intake = self._intake
        if intake is None:
            return False
        message = InboundMessage(
            platform=self.platform,
            event_id=str(update["update_id"]),
            chat_id=str(update["chat_id"]),
            chat_type=ChatType.DM,
            user_id=str(update["user_id"]),
            user_name=str(update["user_id"]),
            text=str(update["text"]),
            message_id=str(update["message_id"]),
        )
        self._note_inbound()
        try:
            await intake(message)
        except Exception as error:  # noqa: BLE001 - not acknowledged, so the platform serves it again
            log.error("relay.intake_failed", event_id=message.event_id, error=str(error), exc_info=error)
            await asyncio.sleep(self._retry_delay)
            return False
        return True

    async def _get_updates(self, *, timeout: float, limit: int = 100) -> list[dict[str, Any]]:
        if self._session is None:
            return []
        params = {"offset": str(self._offset), "timeout": str(timeout), "limit": str(limit)}
        request_timeout = aiohttp.ClientTimeout(total=timeout + 10)
        async with self._session.get(f"{self._base_url}/updates", params=params, timeout=request_timeout) as response:
            response.raise_for_status()
            body = await response.json()
        return list(body["updates"])


class EditingRelayAdapter(RelayAdapter):
    """The relay adapter on a platform whose messages can be edited: replies stream by editing them."""

    capabilities = Capabilities(max_message_length=4096, length_unit="chars", can_edit=True, markup=Markup.PLAIN,
                                rates=UNHURRIED)  # fmt: skip
