"""One inbound message's files, from the platform to what the model reads: :class:`MediaPipeline`.

For each attachment, in order and at most ``media.max_parallel`` at once across all chats:

1. refused before any download when it cannot be used anyway: media off, video and stickers,
   voice notes with no transcription configured or claiming to be too long, and a file whose
   platform-claimed size is over the limit (for a photo sent in several sizes, the smallest one
   that still has every pixel the model would get, within the limit, is taken);
2. downloaded by the adapter within the limit of the kind it claims to be and ``media.download_timeout``;
3. sniffed from its bytes (never the name or the claim), and checked against the limit of what it is;
4. prepared: a picture checked, upright, downscaled and re-encoded; a PDF's pages counted and its
   text extracted; a text file decoded; a voice note or audio file measured and transcribed;
5. kept in the media folder by its sha256 (the original bytes are dropped as soon as they are
   not needed) and described by a :class:`agent.MediaPart`, or a :class:`Transcript`.

Whatever goes wrong becomes a :class:`MediaProblem` with words for the user ("it is 34 MB and the
limit for documents is 20 MB") and a ``media.rejected`` log line; nothing is dropped in silence,
and the message's text goes on to the model regardless.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, Final, Literal

import structlog

from adapters.contract import Adapter, Attachment, InboundMessage, MediaUnavailable
from agent import ANTHROPIC_MAX_EDGE, ANTHROPIC_MAX_PIXELS, MediaPart, estimate_text
from config.media import MediaConfig
from gateway.media.audio import audio_duration
from gateway.media.documents import read_pdf, read_text
from gateway.media.errors import MediaRejected
from gateway.media.images import prepare_image
from gateway.media.sniff import Sniffed, sniff

if TYPE_CHECKING:
    from gateway.media.transcribe import Transcriber
    from storage import MediaFolder

log = structlog.get_logger(__name__)

MB: Final = 1024 * 1024
"""A megabyte of the ``media.limits`` settings (as Telegram and most file managers count them)."""
DOWNLOAD_GRACE: Final = 5.0
"""Seconds past ``download_timeout`` after which a download the adapter did not end is given up here."""

_WHAT: Final = {"photo": "the photo", "voice": "your voice note", "audio": "the audio file", "video": "the video",
                "sticker": "the sticker", "document": "the document"}  # fmt: skip
_NOT_READ: Final = {"video": "video is not read here", "sticker": "stickers are not read here"}
"""Kinds refused before downloading (a video note's first frame is not read either)."""
_EXTENSIONS: Final = {"audio/ogg": ".ogg", "audio/mpeg": ".mp3", "audio/mp4": ".m4a", "audio/wav": ".wav",
                      "audio/flac": ".flac", "audio/webm": ".webm", "audio/x-matroska": ".mka", "audio/amr": ".amr",
                      "audio/amr-wb": ".amr"}  # fmt: skip
"""Transcription endpoints tell the format by the file name's extension: it is set from the sniffed type."""
_NAME_LENGTH: Final = 80


@dataclass(frozen=True, slots=True)
class Transcript:
    """What a voice note or audio file said, to become (part of) the user's text."""

    text: str
    origin: Literal["voice", "audio"]
    duration: float | None
    """Seconds, measured from the file (the platform's claim when the file does not tell)."""
    name: str | None


@dataclass(frozen=True, slots=True)
class MediaProblem:
    """A file that did not reach the model, and what the user is told about it."""

    what: str
    """The file in the user's words: its name, or "the photo", "your voice note"."""
    reason: str
    """One word for logs and metrics, as :class:`MediaRejected`'s (plus ``failed``: an error of ours)."""
    user_text: str
    """Why, in one short sentence without the file's name."""
    kind: str = field(default="file", compare=False)
    """What the platform said the file was (photo, document, voice, ...), for metrics."""


@dataclass(slots=True)
class Prepared:
    """One message's files: parts for the model, transcripts for the text, problems for the user."""

    parts: list[MediaPart] = field(default_factory=list)
    transcripts: list[Transcript] = field(default_factory=list)
    problems: list[MediaProblem] = field(default_factory=list)


@dataclass(slots=True)
class _Seen:
    """What is known of one attachment so far, for the log line if it is refused."""

    size: int | None
    mime: str | None = None
    detail: str | None = None


class _Download:
    """A downloaded file's bytes, held in one place so that whoever prepares them can let go of them (:meth:`take`)
    and memory holds at most one copy of the original while the pipeline goes on."""

    def __init__(self, data: bytes) -> None:
        self._data: bytes | None = data
        self.size = len(data)

    @property
    def data(self) -> bytes:
        assert self._data is not None, "the bytes were taken"
        return self._data

    def take(self) -> bytes:
        """The bytes, no longer held here."""
        data, self._data = self.data, None
        return data


@dataclass(frozen=True, slots=True)
class _KeptText:
    sha256: str | None
    tokens: int | None
    size: int


class MediaPipeline:
    """Attachments to :class:`Prepared`; one per gateway, so ``max_parallel`` holds across all chats."""

    def __init__(self, config: MediaConfig, folder: MediaFolder, transcriber: Transcriber | None) -> None:
        self._config = config
        self._limits = config.limits
        self._folder = folder
        self._transcriber = transcriber
        self._slots = asyncio.Semaphore(config.max_parallel)

    async def prepare(self, adapter: Adapter, message: InboundMessage) -> Prepared:
        """Every attachment of ``message`` downloaded through ``adapter``, checked, kept and described."""
        outcomes = await asyncio.gather(*(self._attachment(adapter, message, item) for item in message.attachments))
        prepared = Prepared()
        for outcome in outcomes:
            if isinstance(outcome, MediaPart):
                prepared.parts.append(outcome)
            elif isinstance(outcome, Transcript):
                prepared.transcripts.append(outcome)
            else:
                prepared.problems.append(outcome)
        return prepared

    async def _attachment(
        self, adapter: Adapter, message: InboundMessage, attachment: Attachment
    ) -> MediaPart | Transcript | MediaProblem:
        seen = _Seen(attachment.size)
        try:
            return await self._take(adapter, message, attachment, seen)
        except MediaRejected as rejected:
            problem = MediaProblem(_what(attachment), rejected.reason, rejected.user_text, attachment.kind)
        except Exception:
            log.exception("media.failed", platform=message.platform, kind=attachment.kind, event_id=message.event_id)
            problem = MediaProblem(_what(attachment), "failed", "it could not be read because of an error on our side",
                                   attachment.kind)
        log.warning("media.rejected", platform=message.platform, kind=attachment.kind, reason=problem.reason,
                    size=seen.size, mime=seen.mime, detail=seen.detail, event_id=message.event_id)  # fmt: skip
        return problem

    async def _take(
        self, adapter: Adapter, message: InboundMessage, attachment: Attachment, seen: _Seen
    ) -> MediaPart | Transcript:
        if not self._config.enabled:
            raise MediaRejected("disabled", "files are not read here")
        if attachment.kind in _NOT_READ:
            raise MediaRejected("unsupported", _NOT_READ[attachment.kind])
        if attachment.kind in ("voice", "audio"):
            self._check_listening(attachment.duration)
        limit = self._claimed_limit(attachment)
        chosen = _rendition(attachment, limit.cap)
        seen.size = chosen.size
        if chosen.size is not None and chosen.size > limit.cap:
            raise limit.refusal(chosen.size)
        async with self._slots:
            download = _Download(await self._download(adapter, chosen, limit, seen))
            sniffed = await self._sniffed(download, seen)
            if sniffed.kind == "image":
                return await self._image(download, attachment, message.timestamp)
            if sniffed.kind == "pdf":
                return await self._pdf(download, attachment, message.timestamp)
            if sniffed.kind == "text":
                return await self._text(download, attachment, message.timestamp)
            return await self._listen(download, sniffed, attachment, seen)

    async def _sniffed(self, download: _Download, seen: _Seen) -> Sniffed:
        """What the downloaded file is, refused unless this gateway reads that and it is within its kind's limit."""
        size = seen.size = download.size
        sniffed = await asyncio.to_thread(sniff, download.data)
        if sniffed is None:
            raise MediaRejected("unsupported", "this kind of file is not read here (pictures, PDFs, text files "
                                               "and voice notes are)")  # fmt: skip
        seen.mime = sniffed.mime
        if sniffed.kind == "video":
            raise MediaRejected("unsupported", _NOT_READ["video"])
        limit = self._limit(sniffed.kind)
        if size > limit.cap:
            raise limit.refusal(size)
        return sniffed

    async def _image(self, download: _Download, attachment: Attachment, sent_at: float) -> MediaPart:
        max_pixels = int(self._limits.image_megapixels * 1e6)
        image = await asyncio.to_thread(prepare_image, download.take(), max_pixels=max_pixels)
        sha256 = await self._folder.put(image.data)
        return _part(attachment, sent_at, kind="image", mime=image.mime, sha256=sha256, size=len(image.data),
                     origin="photo" if attachment.kind == "photo" else "image", width=image.width,
                     height=image.height)  # fmt: skip

    async def _pdf(self, download: _Download, attachment: Attachment, sent_at: float) -> MediaPart:
        limits = self._limits
        pdf = await asyncio.to_thread(read_pdf, download.data, max_pages=limits.pdf_pages, max_chars=limits.text_chars)
        sha256 = await self._folder.put(download.take())  # the model reads the PDF itself where it can
        kept = await self._keep_text(pdf.text, pdf.cut, pages=pdf.pages)
        return _part(attachment, sent_at, kind="pdf", mime="application/pdf", sha256=sha256, size=download.size, origin="pdf",
                     pages=pdf.pages, text_sha256=kept.sha256, text_tokens=kept.tokens)  # fmt: skip

    async def _text(self, download: _Download, attachment: Attachment, sent_at: float) -> MediaPart:
        text, cut = await asyncio.to_thread(read_text, download.take(), max_chars=self._limits.text_chars)
        if not text.strip():
            raise MediaRejected("unsupported", "the file has no text in it")
        kept = await self._keep_text(text, cut)  # what the model reads, and all that is kept
        return _part(attachment, sent_at, kind="text", mime="text/plain", sha256=kept.sha256, size=kept.size,
                     origin="document", text_sha256=kept.sha256, text_tokens=kept.tokens)  # fmt: skip

    def _check_listening(self, claimed_seconds: float | None) -> None:
        """Refuse a voice note before downloading it when it could not be used anyway."""
        if self._transcriber is None:
            raise MediaRejected("no_transcription", "voice messages are not supported here")
        if claimed_seconds is not None:
            self._check_duration(claimed_seconds)

    def _check_duration(self, seconds: float) -> None:
        limit = self._limits.audio_minutes
        if seconds > limit * 60:
            minutes = _exceeding(seconds / 60, limit)
            raise MediaRejected("too_long", f"it is {minutes} minutes long and the limit is {limit:g} minutes")

    async def _listen(self, download: _Download, sniffed: Sniffed, attachment: Attachment, seen: _Seen) -> Transcript:
        """A voice note or audio file (its kind sniffed) measured and transcribed; its bytes are not kept."""
        self._check_listening(None)
        assert self._transcriber is not None
        duration = await asyncio.to_thread(audio_duration, download.data)
        if duration is None:
            # WebM, AMR or a file mutagen cannot read: the platform's claim, else the size limit bounds it.
            seen.detail = "duration not readable from the file"
            duration = attachment.duration
        if duration is not None:
            self._check_duration(duration)
        stem = PurePath(attachment.name).stem if attachment.name else attachment.kind
        name = (stem or "audio") + _EXTENSIONS.get(sniffed.mime, "")
        text = (await self._transcriber.transcribe(download.take(), mime=sniffed.mime, name=name)).strip()
        if not text:
            raise MediaRejected("transcription_failed", "no speech was heard in it")
        return Transcript(text, "voice" if attachment.kind == "voice" else "audio", duration, attachment.name)

    async def _download(self, adapter: Adapter, attachment: Attachment, limit: _Limit, seen: _Seen) -> bytes:
        timeout = self._config.download_timeout
        try:
            async with asyncio.timeout(timeout + DOWNLOAD_GRACE):
                return await adapter.fetch_media(attachment, max_bytes=limit.cap, timeout=timeout)
        except MediaUnavailable as error:
            seen.detail = f"{error.reason}: {error}"
            raise _unavailable(error, attachment.size, limit, timeout) from error
        except TimeoutError:
            seen.detail = "timeout: the adapter did not end the download"
            raise MediaRejected("download_failed", f"the download took longer than {timeout:g} seconds") from None

    async def _keep_text(self, text: str, cut: bool, *, pages: int | None = None) -> _KeptText:
        """The text a document gave kept in the folder as UTF-8, with a note for the model where it was cut."""
        if not text:
            return _KeptText(None, None, 0)
        if cut:
            limit = self._limits.text_chars
            text += (f"\n\n[The text stops here: only the first {limit:,} characters are shown"
                     f"{f' (of {pages} pages)' if pages else ''}.]")  # fmt: skip
        data = text.encode()
        return _KeptText(await self._folder.put(data), estimate_text(text), len(data))

    def _claimed_limit(self, attachment: Attachment) -> _Limit:
        """The download limit of what the platform says a file is. A document or file may turn out to be any kind:
        it may be as large as the largest limit until it is sniffed (a refusal names the kind its MIME type claims)."""
        if attachment.kind == "photo":
            return self._limit("image")
        if attachment.kind in ("voice", "audio"):
            return self._limit("audio")
        limits = self._limits
        largest = max(limits.image_mb, limits.document_mb, limits.audio_mb)
        claimed = _claimed_kind(attachment.mime_type)
        named = self._limit(claimed) if claimed else _Limit(largest, "files")
        return _Limit(named.mb, named.of, int(largest * MB))

    def _limit(self, kind: str) -> _Limit:
        limits = self._limits
        if kind == "image":
            return _Limit(limits.image_mb, "images")
        if kind == "audio":
            return _Limit(limits.audio_mb, "audio")
        return _Limit(limits.document_mb, "documents")


@dataclass(frozen=True, slots=True)
class _Limit:
    """A size limit, and what a refusal calls it."""

    mb: float
    of: str
    """images, documents, audio or files."""
    cap: int = -1
    """The bytes read at most; -1: ``mb`` megabytes."""

    def __post_init__(self) -> None:
        if self.cap < 0:
            object.__setattr__(self, "cap", int(self.mb * MB))

    def refusal(self, size: int | None) -> MediaRejected:
        """``size`` bytes (None: unknown, the download stopped at the limit) refused, in words for the user."""
        if size is None or size <= self.mb * MB:
            return MediaRejected("too_large", f"it is over the {self.mb:g} MB limit for {self.of}")
        return MediaRejected("too_large", f"it is {_exceeding(size / MB, self.mb)} MB and the limit for {self.of} "
                                          f"is {self.mb:g} MB")  # fmt: skip


def _claimed_kind(mime: str | None) -> str | None:
    """The kind a platform's MIME type claims (only to name a limit; the bytes decide what a file is)."""
    if not mime:
        return None
    if mime.startswith("image/"):
        return "image"
    if mime.startswith("audio/"):
        return "audio"
    if mime == "application/pdf" or mime.startswith("text/"):
        return "document"
    return None


def _part(attachment: Attachment, sent_at: float, **fields: Any) -> MediaPart:
    return MediaPart(name=attachment.name, sent_at=sent_at, file_id=attachment.ref, **fields)


def _rendition(attachment: Attachment, cap: int) -> Attachment:
    """The rendition to download: of those within ``cap`` bytes (by the platform's claim), the smallest that
    still has every pixel the model gets, else the largest; the attachment itself when none fits."""
    within = [item for item in (attachment, *attachment.smaller) if item.size is None or item.size <= cap]
    if not within:
        return attachment
    chosen = within[0]
    for item in within[1:]:
        if item.width and item.height and (max(item.width, item.height) >= ANTHROPIC_MAX_EDGE
                                           or item.width * item.height >= ANTHROPIC_MAX_PIXELS):  # fmt: skip
            chosen = item
    return chosen


def _unavailable(error: MediaUnavailable, claimed: int | None, limit: _Limit, timeout: float) -> MediaRejected:
    """A failed download in words for the user."""
    if error.reason == "too_large":
        return limit.refusal(claimed)
    if error.reason == "unsupported":
        return MediaRejected("unsupported", str(error))
    words = {
        "timeout": f"the download took longer than {timeout:g} seconds",
        "redirect": "its download address led to another site, which is not followed",
        "gone": "the platform no longer has the file; try sending it again",
        "refused": "the platform refused the download (the bot may lack the permission to read files)",
    }
    return MediaRejected("download_failed", words.get(error.reason, "the download failed; try sending it again"))


def _exceeding(value: float, limit: float) -> str:
    """``value`` (over ``limit``) with as few decimals as show it over: 34, 10.4, 10.01."""
    for decimals in (0, 1, 2):
        shown = f"{value:.{decimals}f}"
        if float(shown) > limit:
            return shown
    return f"{value:.3f}"


def _what(attachment: Attachment) -> str:
    if attachment.name:
        name = attachment.name
        return name if len(name) <= _NAME_LENGTH else name[: _NAME_LENGTH - 1] + "…"
    return _WHAT.get(attachment.kind, "the file")

