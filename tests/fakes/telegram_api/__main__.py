"""Run the fake Telegram Bot API on its own: ``python -m tests.fakes.telegram_api --port N [--token T]``.

Users write to the bot with ``POST /_test/say {"user_id": 42, "text": "hi"}``;
``GET /_test/sent`` lists what the bot sent, ``GET /_test/shown`` every message, edit and draft the
users saw with its time, and the number of 429 answers sent (``--rates`` enforces Telegram's limits).
"""

from __future__ import annotations

import argparse
import asyncio

from .server import TelegramAPI


async def serve(port: int, token: str, rates: bool) -> None:
    api = TelegramAPI(token=token, port=port, rates=rates)
    await api.start()
    print(f"fake Telegram Bot API on {api.base_url} (token {token})", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await api.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token", default="123456789:TEST-token")
    parser.add_argument("--rates", action="store_true", help="answer calls beyond Telegram's published limits with 429")
    args = parser.parse_args()
    try:
        asyncio.run(serve(args.port, args.token, args.rates))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
