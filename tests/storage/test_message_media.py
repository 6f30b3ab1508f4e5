"""Media references on messages: stored as JSON in ``messages.media``, read back on every path, never the bytes."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import asyncpg
import pytest

from agent.media import MediaPart
from agent.messages import ChatMessage
from gateway.turn.convert import to_chat, to_new
from storage import MessageAppend, NewMessage, OutboxChunk, Store, TurnEnd
from tests.storage.conftest import Opener, new_session

pytestmark = pytest.mark.both_engines

PHOTO = MediaPart(kind="image", mime="image/jpeg", sha256="ab" * 32, size=183_004, origin="photo", width=1280,
                  height=960, sent_at=1_767_225_600.5, file_id="AgACAgIAAxkBAAIB")  # fmt: skip
REPORT = MediaPart(kind="pdf", mime="application/pdf", sha256="cd" * 32, size=402_113, origin="document",
                   name="Q3 Bericht – final.pdf", pages=12, text_sha256="ef" * 32, text_tokens=5120)  # fmt: skip


async def stored_media(engine_name: str, db_path: Path, request: pytest.FixtureRequest) -> list[str | None]:
    """The ``messages.media`` column as the database holds it (JSON text), in message order."""
    if engine_name == "postgresql":
        conn = await asyncpg.connect(request.getfixturevalue("postgres_dsn"))
        try:
            return [row[0] for row in await conn.fetch("SELECT media::text FROM messages ORDER BY id")]
        finally:
            await conn.close()
    with sqlite3.connect(db_path) as conn:
        return [row[0] for row in conn.execute("SELECT media FROM messages ORDER BY id")]


async def test_media_goes_in_with_the_append_and_loads_back(
    store: Store, other_store: Opener, engine_name: str, db_path: Path, request: pytest.FixtureRequest
) -> None:
    session = await new_session(store)
    parts = (PHOTO.to_dict(), REPORT.to_dict())
    appended = await store.append_messages(session.id, [
        NewMessage("user", "what is wrong here?", media=parts),
        NewMessage("assistant", "the config file is missing"),
    ])  # fmt: skip
    assert appended[0].media == parts and appended[1].media == ()
    column = await stored_media(engine_name, db_path, request)
    assert column[1] is None, "no media is NULL, not an empty list"
    assert json.loads(column[0] or "") == [PHOTO.to_dict(), REPORT.to_dict()]
    fresh = await other_store()  # from the table, not the cache
    loaded = await fresh.load_messages(session.id)
    assert loaded == appended
    assert [MediaPart.from_dict(p) for p in loaded[0].media] == [PHOTO, REPORT]


async def test_a_turns_final_messages_keep_their_media(store: Store, other_store: Opener) -> None:
    session = await new_session(store)
    reply = MessageAppend(session.id, [NewMessage("user", "", media=(PHOTO.to_dict(),)),
                                       NewMessage("assistant", "a cat on a keyboard")])  # fmt: skip
    try:
        await store.finish_turn(TurnEnd("turn-1", "telegram", "1", None, [OutboxChunk(text="a cat")], messages=reply))
    except NotImplementedError:  # until PostgreSQL's finish_turn (the outbox part of issue 30) is merged
        pytest.xfail("PostgreSQL's finish_turn is not built on this branch")
    loaded = await (await other_store()).load_messages(session.id)
    assert [m.media for m in loaded] == [(PHOTO.to_dict(),), ()]


async def test_records_give_the_agent_its_media_parts(store: Store) -> None:
    session = await new_session(store)
    sent = ChatMessage(role="user", content="compare these", media=(PHOTO, REPORT))
    (record,) = await store.append_messages(session.id, [to_new(sent)])
    assert record.to_dict()["media"] == [PHOTO.to_dict(), REPORT.to_dict()]
    assert ChatMessage.from_dict(record.to_dict()).media == (PHOTO, REPORT)
    assert to_chat(record).media == (PHOTO, REPORT)
    assert record.to_json_dict()["media"] == [PHOTO.to_dict(), REPORT.to_dict()]
    (plain,) = await store.append_messages(session.id, [to_new(ChatMessage.assistant("ok"))])
    assert "media" not in plain.to_dict() and plain.to_json_dict()["media"] == []
    assert to_chat(plain).media == ()


async def test_a_records_media_cannot_be_changed_through_what_it_hands_out(store: Store) -> None:
    session = await new_session(store)
    part = PHOTO.to_dict()
    (record,) = await store.append_messages(session.id, [NewMessage("user", "", media=[part])])
    part["sha256"] = "00" * 32
    record.to_dict()["media"][0]["size"] = 1
    assert (await store.load_messages(session.id))[0].media == (PHOTO.to_dict(),)


async def test_a_split_session_keeps_the_media_of_the_messages_it_carries(store: Store) -> None:
    session = await new_session(store)
    child = await store.split_session(session.id, [NewMessage("user", "kept", media=(PHOTO.to_dict(),))])
    (loaded,) = await store.load_messages(child.id)
    assert loaded.media == (PHOTO.to_dict(),)


@pytest.mark.parametrize(
    ("media", "error"),
    [
        ((b"\xff\xd8 raw bytes",), "a dict"),
        (({"kind": "image", "sha256": "../../etc/passwd"},), "sha256"),
        (({"kind": "image"},), "sha256"),
        (({**PHOTO.to_dict(), "data": "iVBORw0KGgo" * 2000},), "references"),
    ],
    ids=["bytes", "path in the name", "no name", "base64 inside"],
)
def test_media_that_is_not_a_reference_is_refused(media: tuple[object, ...], error: str) -> None:
    with pytest.raises((TypeError, ValueError), match=error):
        NewMessage("user", "x", media=media)  # type: ignore[arg-type]
