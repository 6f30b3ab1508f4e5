"""What the pipeline tests run against: a platform that hands out files, a media folder, a scripted transcriber.

The platform is the loopback test adapter (a real :class:`adapters.contract.Adapter`) whose ``fetch_media``
answers from a dict, as a platform's download would: the real downloads through the real platform
libraries and emulators are tested end to end elsewhere.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from adapters.contract import Attachment, ChatType, InboundMessage, MediaUnavailable
from config.media import MediaConfig
from gateway.media.errors import MediaRejected
from gateway.media.pipeline import MediaPipeline
from tests.fakes.adapter import LoopbackAdapter

from storage import MediaFolder


class FileShelf(LoopbackAdapter):
    """The loopback adapter with files to hand out: ``files[ref]`` is the bytes, or the error its download raises,
    or an :class:`asyncio.Event` the download waits for before giving ``held[ref]``."""

    def __init__(self) -> None:
        super().__init__()
        self.files: dict[str, bytes | BaseException | asyncio.Event] = {}
        self.held: dict[str, bytes] = {}
        self.fetched: list[tuple[str | None, int, float]] = []
        self.downloading = 0
        self.most_at_once = 0

    async def fetch_media(self, attachment: Attachment, *, max_bytes: int, timeout: float) -> bytes:
        self.fetched.append((attachment.ref, max_bytes, timeout))
        found = self.files[attachment.ref or ""]
        self.downloading += 1
        self.most_at_once = max(self.most_at_once, self.downloading)
        try:
            if isinstance(found, asyncio.Event):
                await found.wait()
                found = self.held[attachment.ref or ""]
            if isinstance(found, BaseException):
                raise found
            if len(found) > max_bytes:
                raise MediaUnavailable("too_large", f"the file is {len(found)} bytes, over {max_bytes}")
            return found
        finally:
            self.downloading -= 1


@dataclass
class Heard:
    data: bytes
    mime: str
    name: str | None


class ScriptedTranscriber:
    """Stands for ``gateway.media.transcribe.Transcriber`` (its own tests run it against the fake endpoint):
    answers ``text``, or raises ``error``; records what it was given."""

    def __init__(self, text: str = "hello from a voice note", error: MediaRejected | None = None) -> None:
        self.text = text
        self.error = error
        self.heard: list[Heard] = []

    async def transcribe(self, data: bytes, *, mime: str, name: str | None) -> str:
        self.heard.append(Heard(data, mime, name))
        if self.error is not None:
            raise self.error
        return self.text


@pytest.fixture
def folder(tmp_path: Path) -> MediaFolder:
    root = tmp_path / "media"
    return MediaFolder(root)


@pytest.fixture
def shelf() -> FileShelf:
    return FileShelf()


PipelineFactory = Callable[..., MediaPipeline]


@pytest.fixture
def make_pipeline(folder: Any) -> PipelineFactory:
    def make(transcriber: ScriptedTranscriber | None = None, **config: Any) -> MediaPipeline:
        return MediaPipeline(MediaConfig.model_validate(config), folder, transcriber)  # type: ignore[arg-type]

    return make


def message(*attachments: Attachment, text: str = "", event_id: str = "7") -> InboundMessage:
    return InboundMessage(platform="loopback", event_id=event_id, chat_id="c1", chat_type=ChatType.DM, user_id="u1",
                          text=text, attachments=attachments, timestamp=1_750_000_000.0)  # fmt: skip
