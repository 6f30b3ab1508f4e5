"""Files users send, as the Telegram adapter describes them to the gateway (through real aiogram polling).

A photo is its largest rendition with the other sizes in ``smaller`` (largest first), a
document keeps its name and type, voice notes and audio their duration, an album's messages
share ``group_id``, and a caption is the message's text.
"""

from __future__ import annotations

from adapters.contract import Attachment
from tests.adapters.telegram.conftest import ALICE, Listening
from tests.fakes.telegram_api import Document, Rendition, TelegramAPI


async def test_a_photo_is_its_largest_size_with_the_smaller_ones_largest_first_and_the_caption_as_text(
    telegram_api: TelegramAPI, listening: Listening
) -> None:
    sizes = (Rendition(b"s" * 900, 90, 60), Rendition(b"m" * 9000, 320, 213), Rendition(b"L" * 90000, 1280, 853))
    update = await telegram_api.send_photo(ALICE, "what is wrong here?", sizes=sizes)
    [message] = await listening.next()

    small, medium, large = update["message"]["photo"]
    assert message.text == "what is wrong here?"
    assert message.group_id is None
    assert message.attachments == (
        Attachment(
            kind="photo", mime_type="image/jpeg", size=90000, ref=large["file_id"], width=1280, height=853,
            smaller=(
                Attachment(kind="photo", mime_type="image/jpeg", size=9000, ref=medium["file_id"], width=320, height=213),
                Attachment(kind="photo", mime_type="image/jpeg", size=900, ref=small["file_id"], width=90, height=60),
            ),
        ),
    )  # fmt: skip


async def test_a_document_keeps_its_name_type_and_size(telegram_api: TelegramAPI, listening: Listening) -> None:
    update = await telegram_api.send_document(ALICE, "report.pdf", "application/pdf", data=b"%PDF-1.7 " * 100,
                                              caption="summarise this")  # fmt: skip
    [message] = await listening.next()

    assert message.text == "summarise this"
    assert message.attachments == (
        Attachment(kind="document", name="report.pdf", mime_type="application/pdf", size=900,
                   ref=update["message"]["document"]["file_id"]),
    )  # fmt: skip


async def test_a_voice_note_and_an_audio_file_carry_their_duration(telegram_api: TelegramAPI, listening: Listening) -> None:
    voice = await telegram_api.send_voice(ALICE, data=b"OggS" * 50, duration=7)
    audio = await telegram_api.send_audio(ALICE, "interview.mp3", data=b"ID3" * 100, duration=321, title="Interview")
    first, second = await listening.next(2)

    assert first.text == "" and first.attachments == (
        Attachment(kind="voice", mime_type="audio/ogg", size=200, ref=voice["message"]["voice"]["file_id"], duration=7),
    )
    assert second.attachments == (
        Attachment(kind="audio", name="interview.mp3", mime_type="audio/mpeg", size=300,
                   ref=audio["message"]["audio"]["file_id"], duration=321),
    )  # fmt: skip


async def test_an_albums_messages_share_its_media_group_id(telegram_api: TelegramAPI, listening: Listening) -> None:
    photo = (Rendition(b"t" * 10, 90, 90), Rendition(b"P" * 500, 800, 800))
    pdf = Document(b"%PDF-1.4", "notes.pdf", "application/pdf")
    updates = await telegram_api.send_album(ALICE, [photo, photo, pdf], caption="three at once", group_id="777")
    messages = await listening.next(3)

    assert [m.group_id for m in messages] == ["777", "777", "777"]
    assert [m.text for m in messages] == ["three at once", "", ""]
    assert [m.event_id for m in messages] == [str(u["update_id"]) for u in updates]
    assert [[a.kind for a in m.attachments] for m in messages] == [["photo"], ["photo"], ["document"]]
    assert [len(m.attachments[0].smaller) for m in messages[:2]] == [1, 1]


async def test_videos_video_notes_animations_and_stickers_are_described_not_offered_as_documents(
    telegram_api: TelegramAPI, listening: Listening
) -> None:
    def file(folder: str, **fields: object) -> dict[str, object]:
        return telegram_api.file_json(telegram_api.add_file(b"v" * 64, folder=folder), **fields)

    video = file("videos", width=640, height=360, duration=12, mime_type="video/mp4", file_name="clip.mp4")
    note = file("video_notes", length=240, duration=5)
    gif = file("animations", width=320, height=240, duration=2, mime_type="video/mp4", file_name="funny.gif.mp4")
    sticker = file("stickers", width=512, height=512, emoji="🙂", type="regular", is_animated=False, is_video=False)
    await telegram_api.say(ALICE, caption="a clip", extra={"video": video})
    await telegram_api.say(ALICE, extra={"video_note": note})
    # Telegram sends an animation (a GIF) with a ``document`` field too, for old clients.
    await telegram_api.say(ALICE, extra={"animation": gif, "document": {**gif, "file_name": "funny.gif.mp4"}})
    await telegram_api.say(ALICE, extra={"sticker": sticker})
    clip, round_video, animation, emoji = await listening.next(4)

    assert clip.text == "a clip" and clip.attachments == (
        Attachment(kind="video", name="clip.mp4", mime_type="video/mp4", size=64, ref=video["file_id"],
                   width=640, height=360, duration=12),
    )  # fmt: skip
    assert round_video.attachments == (
        Attachment(kind="video", name="video note", size=64, ref=note["file_id"], width=240, height=240, duration=5),
    )
    assert animation.attachments == (
        Attachment(kind="video", name="funny.gif.mp4", mime_type="video/mp4", size=64, ref=gif["file_id"],
                   width=320, height=240, duration=2),
    )  # fmt: skip
    assert emoji.attachments == (
        Attachment(kind="sticker", name="🙂", size=64, ref=sticker["file_id"], width=512, height=512),
    )
