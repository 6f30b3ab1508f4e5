"""Users sending files to the bot: photos, documents, voice notes, audio and albums, as Telegram delivers them.

Each ``send_*`` keeps the bytes as files the bot can download (see :mod:`.files`) and
queues the message update that carries them, with the fields Telegram fills in: a photo
comes in several renditions (smallest first, the last one the original's size), a voice
note and an audio file with their duration, a document with its name and MIME type. An
album is several messages sharing one ``media_group_id``, queued together so one
``getUpdates`` answer (or one burst of webhook deliveries) brings them all, as Telegram
sends them. Without bytes, each helper makes up a few placeholder bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .builders import Chat, User
from .files import Fault, FileSide


@dataclass(frozen=True, slots=True)
class Rendition:
    """One size of a photo: the bytes Telegram serves for it and the dimensions it claims."""

    data: bytes
    width: int
    height: int
    fault: Fault | None = None


@dataclass(frozen=True, slots=True)
class Document:
    data: bytes
    name: str
    mime_type: str
    fault: Fault | None = None


Photo = Sequence[Rendition]
"""A photo's renditions, smallest first (Telegram's order)."""

PLACEHOLDER_PHOTO: Photo = (
    Rendition(b"\xff\xd8small" * 10, 90, 60), Rendition(b"\xff\xd8medium" * 40, 320, 213),
    Rendition(b"\xff\xd8large" * 200, 1280, 853),
)  # fmt: skip


class MediaSide(FileSide):
    async def send_photo(
        self, user: User, caption: str | None = None, *, chat: Chat | None = None, sizes: Photo = PLACEHOLDER_PHOTO,
    ) -> dict[str, Any]:  # fmt: skip
        """``user`` sends one photo (``sizes``: its renditions, smallest first), with ``caption`` if given."""
        return await self.say(user, chat=chat, caption=caption, extra={"photo": self.photo_json(sizes)})

    async def send_document(
        self, user: User, name: str, mime_type: str, *, data: bytes | None = None, caption: str | None = None,
        chat: Chat | None = None, fault: Fault | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        data = data if data is not None else f"contents of {name}".encode(errors="replace")  # a name may hold half a pair
        document = Document(data, name, mime_type, fault)
        return await self.say(user, chat=chat, caption=caption, extra={"document": self.document_json(document)})

    async def send_voice(
        self, user: User, *, data: bytes = b"OggS voice", duration: int = 3, mime_type: str = "audio/ogg",
        chat: Chat | None = None, fault: Fault | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        """A voice note (Telegram records them as OGG/Opus)."""
        file_id = self.add_file(data, folder="voice", suffix=".oga", fault=fault)
        voice = self.file_json(file_id, duration=duration, mime_type=mime_type)
        return await self.say(user, chat=chat, extra={"voice": voice})

    async def send_audio(
        self, user: User, name: str = "song.mp3", *, data: bytes = b"ID3 audio", duration: int = 184,
        mime_type: str = "audio/mpeg", title: str | None = None, performer: str | None = None,
        caption: str | None = None, chat: Chat | None = None, fault: Fault | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        """A music or audio file (sent as audio, not as a document)."""
        file_id = self.add_file(data, folder="music", suffix=_suffix(name), fault=fault)
        fields = {"duration": duration, "file_name": name, "mime_type": mime_type, "title": title, "performer": performer}
        audio = self.file_json(file_id, **{key: value for key, value in fields.items() if value is not None})
        return await self.say(user, chat=chat, caption=caption, extra={"audio": audio})

    async def send_album(
        self, user: User, items: Sequence[Photo | Document], *, caption: str | None = None, chat: Chat | None = None,
        group_id: str = "13579000000000001",
    ) -> list[dict[str, Any]]:  # fmt: skip
        """``user`` sends several photos or documents at once: one message each, all with the same
        ``media_group_id``, the caption on the first (where Telegram's apps put it). Returns the updates."""
        messages = []
        for index, item in enumerate(items):
            media = {"document": self.document_json(item)} if isinstance(item, Document) else {"photo": self.photo_json(item)}
            message = self.message(user, chat=chat, caption=caption if index == 0 else None,
                                   extra={**media, "media_group_id": group_id})  # fmt: skip
            messages.append(message)
        return await self.queue(*messages)

    def photo_json(self, sizes: Photo) -> list[dict[str, Any]]:
        """The ``photo`` field: one PhotoSize per rendition, each a file of its own."""
        return [
            self.file_json(self.add_file(size.data, folder="photos", suffix=".jpg", fault=size.fault),
                           width=size.width, height=size.height)
            for size in sizes
        ]  # fmt: skip

    def document_json(self, document: Document) -> dict[str, Any]:
        file_id = self.add_file(document.data, folder="documents", suffix=_suffix(document.name), fault=document.fault)
        return self.file_json(file_id, file_name=document.name, mime_type=document.mime_type)


def _suffix(name: str) -> str:
    """The file path's extension, from the name the user's file had (Telegram keeps it)."""
    return "." + name.rpartition(".")[2] if "." in name else ""
