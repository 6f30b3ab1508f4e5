"""Downloading a file a user sent: ``getFile``, then the file's URL on the configured Bot API server.

``getFile`` goes through the adapter's aiogram ``Bot``, so it uses the configured
``api_base_url`` and the token like every other call. The file is then read from
the URL aiogram's API server builds for the returned path (``{base}/file/bot<token>/<path>``):
the cloud Bot API, a local Bot API server behind its file server, or the test emulator.
The bytes come through :func:`adapters.download.download` on the adapter's own
:class:`adapters.download.DownloadSession` (opened on first use, closed with the adapter), which caps the
size, times out and never follows a redirect to another host.

A file is refused as ``too_large`` before it is downloaded when the message claims
more than the limit, when ``getFile`` does, or when the cloud Bot API answers "file
is too big" (it hands bots files up to 20 MB). Every failure is a
:class:`MediaUnavailable` whose message a user may be shown; none of them carries
the file URL, which holds the bot token: the underlying exceptions are not chained
to it, and nothing here logs the URL.
"""

from __future__ import annotations

import asyncio
import math

import structlog
from aiogram import Bot
from aiogram.exceptions import (
    ClientDecodeError,
    TelegramAPIError,
    TelegramBadRequest,
    TelegramForbiddenError,
    TelegramNetworkError,
    TelegramRetryAfter,
    TelegramUnauthorizedError,
)
from aiogram.methods import GetFile
from aiogram.types import File

from adapters.contract import Attachment, MediaUnavailable
from adapters.download import DownloadSession, download

log = structlog.get_logger(__name__)

CLOUD_LIMIT_MB = 20
"""The largest file the cloud Bot API lets a bot download."""
TOO_BIG = "file is too big"
"""How the Bot API's 400 to ``getFile`` says a file is over its download limit."""
GONE = ("wrong file_id", "temporarily unavailable", "invalid file_id", "file not found")
"""How a 400 to ``getFile`` says the file is not (or no longer) there."""


class FileDownloads:
    """The Telegram adapter's downloads of files users sent."""

    def __init__(self) -> None:
        self._session = DownloadSession("Telegram")

    async def fetch(self, bot: Bot, attachment: Attachment, *, max_bytes: int, timeout: float) -> bytes:
        """The bytes of ``attachment`` (see :meth:`adapters.contract.Adapter.fetch_media`)."""
        if attachment.size is not None and attachment.size > max_bytes:
            raise _too_large(attachment.size, max_bytes)
        if not attachment.ref:
            raise MediaUnavailable("gone", "the message names no file to download")
        try:
            async with asyncio.timeout(timeout):
                found = await _look_up(bot, attachment.ref, timeout)
                if found.file_size is not None and found.file_size > max_bytes:
                    raise _too_large(found.file_size, max_bytes)
                if not found.file_path:
                    raise MediaUnavailable("gone", "Telegram gave no path to download the file from")
                url = bot.session.api.file_url(bot.token, found.file_path)
                return await download(self._session.get(), url, max_bytes=max_bytes, timeout=timeout)
        except TimeoutError:
            raise MediaUnavailable("timeout", f"the download took longer than {timeout:g} s") from None
        except MediaUnavailable as error:
            # Anew and unchained: an exception of the HTTP client under it may name the file URL, and the token with it.
            raise MediaUnavailable(error.reason, str(error)) from None

    async def close(self) -> None:
        """Close the HTTP session; later downloads are refused. Idempotent."""
        await self._session.close()


async def _look_up(bot: Bot, file_id: str, timeout: float) -> File:
    """``getFile``: the file's path and size on the Bot API server, or why there is none."""
    try:
        return await bot(GetFile(file_id=file_id), request_timeout=math.ceil(timeout))
    except TelegramBadRequest as error:
        text = error.message.lower()
        if TOO_BIG in text:
            raise MediaUnavailable("too_large", f"Telegram hands bots files of up to {CLOUD_LIMIT_MB} MB, and this one is "
                                                "larger") from None  # fmt: skip
        if any(marker in text for marker in GONE):
            raise MediaUnavailable("gone", "Telegram no longer has the file") from None
        raise _refusal("failed", f"Telegram refused to hand out the file ({error.message})", file_id, error) from None
    except (TelegramUnauthorizedError, TelegramForbiddenError) as error:
        raise _refusal("refused", f"Telegram refused the bot access to the file ({error.message})", file_id, error) from None
    except TelegramRetryAfter as error:
        raise _refusal("failed", f"Telegram asked to wait {error.retry_after} s before looking up the file", file_id,
                       error) from None  # fmt: skip
    except (TelegramNetworkError, ClientDecodeError) as error:
        # Their text may hold what a proxy sent back or the URL asked, token included: named by type only.
        raise _refusal("failed", "Telegram could not be reached to look up the file", file_id, error) from None
    except TelegramAPIError as error:
        raise _refusal("failed", f"Telegram answered getFile with an error ({error.message})", file_id, error) from None


def _refusal(reason: str, message: str, file_id: str, error: Exception) -> MediaUnavailable:
    """The error for a failed ``getFile``, logged for the operator with Telegram's own words (the gateway logs the
    reason it tells the user)."""
    log.warning("telegram.media.getfile_failed", reason=reason, file_id=file_id, error=type(error).__name__,
                detail=message)  # fmt: skip
    return MediaUnavailable(reason, message)


def _too_large(size: int, limit: int) -> MediaUnavailable:
    return MediaUnavailable("too_large", f"the file is {size:,} bytes, over the {limit:,} bytes allowed")
