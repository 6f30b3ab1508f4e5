"""The HTTP listener every Switchboard endpoint is served by: aiohttp with limits for slow and surplus clients.

aiohttp waits as long as a client likes for a request's headers and body, and
takes every connection that arrives, so a few clients trickling a byte now and
then could hold file descriptors and buffers for an hour or more each, as many
as they open. :class:`HttpListener` serves an aiohttp application under
:class:`ListenerLimits`:

* **headers**: from connecting, or from the first byte of the next request on a
  kept-alive connection, a client has ``header_timeout`` seconds to send the
  request line and all headers; then the connection is closed without an answer.
* **body**: once the headers are in, the body has ``body_timeout`` seconds to
  arrive in full (it is read before the route's handler runs); then the client
  gets 408 and the connection is closed (after aiohttp's lingering, at most 10 s).
* **idle**: a kept-alive connection without a new request (or that does not take
  its response) is closed after ``idle_timeout`` seconds; the default is longer
  than reverse proxies keep idle connections to their upstream (nginx: 60 s), so
  the proxy closes first and never sends on a connection we are closing.
* **connections**: at most ``max_connections`` are open at once; one more is
  answered ``503`` with ``Retry-After`` at once and closed, without being read.

The handler itself (storing a Telegram update, dispatching a Slack event) is not
timed. Bytes of a next request that arrive while the previous one is still being
handled (pipelining) fall under the idle clock, not the header clock: looser, but
bounded all the same. Clients cut off for slow headers or body are logged (``http.client.cut_off``,
info) and a full listener (``http.listener.full``, warning), each at most once a
minute per listener with a count of what was not logged, so that a flood of
connections cannot flood the log as well.

The Telegram webhook and the Slack events endpoint (adapters) and ``/health``
(the gateway) all listen through this module; it lives with the adapters because
adapters may import nothing from the gateway but its event types, while the
gateway may use adapters' modules.
"""

from __future__ import annotations

import asyncio
import errno
from dataclasses import dataclass
from typing import Any, cast

import structlog
from aiohttp import web

log = structlog.get_logger(__name__)

FULL_RESPONSE = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 45\r\n"
    b"Retry-After: 5\r\nConnection: close\r\n\r\ntoo many open connections; try again shortly\n"
)
LOG_EVERY = 60.0
"""Seconds between two log lines about cut-off clients (or about a full listener) of one listener."""


@dataclass(frozen=True, slots=True)
class ListenerLimits:
    header_timeout: float = 10.0
    """Seconds for a request's line and headers, from connecting or from the next request's first byte."""
    body_timeout: float = 30.0
    """Seconds for a request's body, once its headers are in."""
    max_connections: int = 256
    """Connections open at once; more are refused with 503."""
    idle_timeout: float = 75.0
    """Seconds a kept-alive connection may wait for its next request (or not take its response)."""

    @classmethod
    def from_config(cls, section: Any) -> ListenerLimits:
        """From a listen section of the config (``header_timeout``, ``body_timeout``, ``max_connections``)."""
        return cls(header_timeout=section.header_timeout, body_timeout=section.body_timeout,
                   max_connections=section.max_connections)  # fmt: skip


class _Throttle:
    """Lets one log line through per ``LOG_EVERY`` seconds and counts the events it held back meanwhile."""

    def __init__(self) -> None:
        self._next = 0.0
        self._held = 0

    def due(self, now: float) -> int | None:
        """None while the line must wait; else how many events were held back since the last line."""
        if now < self._next:
            self._held += 1
            return None
        held, self._held, self._next = self._held, 0, now + LOG_EVERY
        return held


class ListenError(OSError):
    """A listener could not take its address (the port is in use, the host is not on this machine).

    A fault of the configuration, not of the moment: the gateway stops at start with the message
    (exit status 2) instead of being restarted into the same error."""

    def __str__(self) -> str:
        return str(self.strerror)  # the whole message, without OSError's "[Errno 98] " in front


class HttpListener:
    """Serves ``app`` (one listener per app) on ``host:port`` under ``limits``; ``name`` tells the
    listeners apart in the log, ``setting`` is the configuration key of its port (named when it cannot listen)."""

    def __init__(self, app: web.Application, *, name: str, host: str, port: int, setting: str,
                 limits: ListenerLimits = ListenerLimits(), shutdown_timeout: float = 60.0) -> None:  # fmt: skip
        self.name = name
        self.setting = setting
        self.limits = limits
        self._app = app
        self._host = host
        self._port = port
        self._shutdown_timeout = shutdown_timeout
        self._runner: web.AppRunner | None = None
        self._server: asyncio.Server | None = None
        self._open: dict[web.RequestHandler, _Connection] = {}
        self._cut_off = _Throttle()
        self._full = _Throttle()

    async def start(self) -> tuple[str, int]:
        """Listen; the host and the real port listened on (useful when the configured port is 0).

        Raises :class:`ListenError` (port taken, address not available) with nothing left behind.
        """

        @web.middleware
        async def watch(request: web.Request, handler: Any) -> web.StreamResponse:
            return await self._watch(request, handler)

        self._app.middlewares.insert(0, watch)
        runner = web.AppRunner(self._app, access_log=None, handle_signals=False, shutdown_timeout=self._shutdown_timeout,
                               keepalive_timeout=self.limits.idle_timeout)  # fmt: skip
        await runner.setup()
        try:
            self._server = await asyncio.get_running_loop().create_server(
                lambda: _Connection(self), self._host, self._port
            )
        except OSError as error:
            await runner.cleanup()
            raise ListenError(error.errno, self._cannot_listen(error)) from error
        self._runner = runner
        host, port = self._server.sockets[0].getsockname()[:2]
        return host, port

    def _cannot_listen(self, error: OSError) -> str:
        host_setting = self.setting.rpartition(".")[0] + ".host"
        if error.errno == errno.EADDRINUSE:
            reason, fix = "address already in use", (f"stop what listens there (another Switchboard?) or choose "
                                                     f"another {self.setting} in config.yaml")  # fmt: skip
        elif error.errno == errno.EACCES:
            reason, fix = "permission denied", f"ports below 1024 need privileges: choose a higher {self.setting}"
        else:
            reason, fix = error.strerror or str(error), f"check {host_setting} and {self.setting} in config.yaml"
        return f"the {self.name} endpoint cannot listen on {self._host}:{self._port} ({reason}): {fix}"

    async def stop(self) -> None:
        """Stop taking connections, let running requests finish (up to ``shutdown_timeout``), close the rest."""
        server, self._server = self._server, None
        runner, self._runner = self._runner, None
        if server is not None:
            server.close()
        if runner is not None:
            await runner.cleanup()

    # --- connections ---------------------------------------------------------------------------
    def _admit(self, connection: _Connection) -> web.RequestHandler | None:
        """aiohttp's handler for a new connection, or None when the listener is full or stopping."""
        if self._runner is None or self._runner.server is None:
            return None
        if len(self._open) >= self.limits.max_connections:
            held = self._full.due(asyncio.get_running_loop().time())
            if held is not None:
                log.warning("http.listener.full", listener=self.name, max_connections=self.limits.max_connections,
                            refused_unlogged=held, hint="slow or stuck clients, or a flood; new connections get 503 "
                            "until some close")  # fmt: skip
            return None
        handler = self._runner.server()
        self._open[handler] = connection
        return handler

    def _closed(self, handler: web.RequestHandler) -> None:
        self._open.pop(handler, None)

    def _note_cut_off(self, phase: str, remote: str | None, seconds: float) -> None:
        held = self._cut_off.due(asyncio.get_running_loop().time())
        if held is not None:
            log.info("http.client.cut_off", listener=self.name, phase=phase, remote=remote, seconds=seconds,
                     cut_off_unlogged=held, hint=f"the client did not send its request {phase} in time")  # fmt: skip

    # --- requests ------------------------------------------------------------------------------
    async def _watch(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """Around every request: stop the header clock, read the body in time, start the idle clock after."""
        connection = self._open.get(request.protocol)
        if connection is not None:
            connection.request_started()
        try:
            if request.body_exists:
                try:
                    async with asyncio.timeout(self.limits.body_timeout):
                        await request.read()  # kept by aiohttp: the handler's read(), text() or json() get it
                except TimeoutError:
                    self._note_cut_off("body", request.remote, self.limits.body_timeout)
                    response = web.Response(status=408, text="the request body did not arrive in time\n")
                    response.force_close()
                    return response
            return await handler(request)
        finally:
            if connection is not None:
                connection.request_finished()


class _Connection(asyncio.Protocol):
    """One client connection: admitted (or refused when the listener is full), then passed on to aiohttp's
    protocol, with a clock that runs while the client owes us headers or sits idle."""

    def __init__(self, listener: HttpListener) -> None:
        self._listener = listener
        self._handler: web.RequestHandler | None = None
        self._transport: asyncio.Transport | None = None
        self._clock: asyncio.TimerHandle | None = None
        self._idle = False
        """Between requests: the next byte starts the next request's header clock."""
        self._lost = False
        self.remote: str | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # uvloop's transports are not asyncio.Transport subclasses
        self._transport = transport
        peer = transport.get_extra_info("peername")
        self.remote = str(peer[0]) if isinstance(peer, tuple) else None
        self._handler = self._listener._admit(self)
        if self._handler is None:
            transport.write(FULL_RESPONSE)
            transport.close()
            return
        self._handler.connection_made(transport)
        self._start_clock("headers")

    def data_received(self, data: bytes) -> None:
        if self._handler is None:
            return
        if self._idle:
            self._idle = False
            self._start_clock("headers")
        self._handler.data_received(data)

    def eof_received(self) -> bool | None:
        return self._handler.eof_received() if self._handler is not None else None

    def pause_writing(self) -> None:
        if self._handler is not None:
            self._handler.pause_writing()

    def resume_writing(self) -> None:
        if self._handler is not None:
            self._handler.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._stop_clock()
        if self._handler is not None:
            self._listener._closed(self._handler)
            self._handler.connection_lost(exc)

    def request_started(self) -> None:
        self._idle = False
        self._stop_clock()

    def request_finished(self) -> None:
        self._idle = True
        self._start_clock("idle")

    def _start_clock(self, phase: str) -> None:
        self._stop_clock()
        if self._lost:  # a request that ends after its client left
            return
        limits = self._listener.limits
        seconds = limits.header_timeout if phase == "headers" else limits.idle_timeout
        self._clock = asyncio.get_running_loop().call_later(seconds, self._cut_off, phase)

    def _stop_clock(self) -> None:
        if self._clock is not None:
            self._clock.cancel()
            self._clock = None

    def _cut_off(self, phase: str) -> None:
        self._clock = None
        if phase == "headers":  # an idle connection closed is the ordinary end of keep-alive, not news
            self._listener._note_cut_off(phase, self.remote, self._listener.limits.header_timeout)
        if self._transport is not None:
            self._transport.abort()  # not close(): a client that does not read would keep an unsent answer waiting
