"""Another site, on another loopback address (127.0.0.2): where a file's address must never lead a download.

Platform emulators redirect a download here, or put its URL into a file's description, to check that an
adapter does not follow them and never sends its credentials here: every request that arrives is
recorded with its headers (:attr:`OtherSite.requests`), and answered with a small body.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

HOST = "127.0.0.2"
"""Linux routes the whole 127.0.0.0/8 to loopback: another host, still on this machine."""
BODY = b"a page that is not the file"


@dataclass(frozen=True, slots=True)
class Arrived:
    path: str
    headers: dict[str, str]


class OtherSite:
    def __init__(self) -> None:
        self.requests: list[Arrived] = []
        self.port = 0
        self._runner: web.AppRunner | None = None

    def url(self, path: str = "/") -> str:
        return f"http://{HOST}:{self.port}{path}"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._answer)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, HOST, 0).start()
        self.port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _answer(self, request: web.Request) -> web.Response:
        self.requests.append(Arrived(request.path, dict(request.headers)))
        return web.Response(body=BODY, content_type="application/octet-stream")

