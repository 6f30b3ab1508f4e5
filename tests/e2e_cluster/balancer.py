"""A round-robin HTTP load balancer on 127.0.0.1, as an operator puts in front of several gateways' webhooks.

Each request goes, unchanged (method, path, query, body, the Telegram secret header), to the next
upstream in turn. An upstream that refuses the connection (its process is gone) is skipped for the
next one, as nginx's ``proxy_next_upstream error`` does, since nothing reached it; an upstream that
drops the connection after taking the request is answered 502, so the sender (the Telegram emulator)
delivers the update again later, to whichever replica is next: the same update may then reach two
replicas, which is what the cluster's dedup on the platform's event id is for.
"""

from __future__ import annotations

import itertools
from collections import Counter

import aiohttp
from aiohttp import web

from tests.fakes.catch_all_proxy import HOP_BY_HOP, CatchAllProxy


class RoundRobinBalancer(CatchAllProxy):
    def __init__(self, upstreams: list[str]) -> None:
        super().__init__()
        self.upstreams = list(upstreams)
        """Base URLs (``http://127.0.0.1:PORT``) requests are spread over."""
        self.forwarded: Counter[str] = Counter()
        """Requests each upstream answered."""
        self.refused: Counter[str] = Counter()
        """Requests an upstream refused (connection refused: skipped for the next one)."""
        self.dropped = 0
        """Requests an upstream took and never answered (answered 502 here)."""
        self._turn = itertools.count()

    def client(self) -> aiohttp.ClientSession:
        # One connection per request: a kept-alive connection to a killed replica would fail the next request late.
        return aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True),
                                     timeout=aiohttp.ClientTimeout(total=30))  # fmt: skip

    async def _forward(self, request: web.Request) -> web.Response:
        body = await request.read()
        headers = {name: value for name, value in request.headers.items() if name.lower() not in HOP_BY_HOP}
        for _ in range(len(self.upstreams)):
            upstream = self.upstreams[next(self._turn) % len(self.upstreams)]
            try:
                async with self.session.request(request.method, upstream + request.path_qs, data=body,
                                                headers=headers) as answer:  # fmt: skip
                    content = await answer.read()
                    self.forwarded[upstream] += 1
                    return web.Response(status=answer.status, body=content,
                                        content_type=answer.content_type)  # fmt: skip
            except aiohttp.ClientConnectorError:
                self.refused[upstream] += 1
                continue
            except (aiohttp.ClientError, TimeoutError):
                self.dropped += 1
                return web.Response(status=502, text=f"upstream {upstream} dropped the request")
        return web.Response(status=502, text="no upstream answered")
