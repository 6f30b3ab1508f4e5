"""An inbound message is storable by construction: bad text is repaired, a wrong type is refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.contract import Attachment, ChatType, InboundMessage
from storage import Store

HALF = "\ud83d"
"""The first half of an emoji's UTF-16 pair, alone: what a JSON ``\\ud83d`` escape decodes to."""


def message(**fields: object) -> InboundMessage:
    values: dict[str, object] = {"platform": "telegram", "event_id": "1", "chat_id": "100", "chat_type": ChatType.DM,
                                 "user_id": "7", "text": "hi"}  # fmt: skip
    values.update(fields)
    return InboundMessage(**values)  # type: ignore[arg-type]


async def test_half_a_surrogate_pair_in_any_text_field_is_stored_as_a_replacement_character(tmp_path: Path) -> None:
    attachment = Attachment(kind=f"document{HALF}", name=f"report{HALF}.pdf", mime_type=f"application/{HALF}",
                            ref=f"file-{HALF}", size=10)  # fmt: skip
    half = message(platform=f"tele{HALF}", event_id=f"1{HALF}", chat_id=f"100{HALF}", user_id=f"7{HALF}",
                   text=f"hi {HALF}", message_id=f"5{HALF}", thread_id=f"6{HALF}", server_id=f"8{HALF}",
                   user_name=f"Ann {HALF}", attachments=(attachment,))  # fmt: skip
    store = await Store.open(tmp_path / "state.db")
    try:
        assert await store.inbox_accept(half.platform, half.event_id, "key", half.to_dict())
        [record] = await store.inbox_unfinished()
    finally:
        await store.close()
    replayed = InboundMessage.from_dict(record.payload)
    assert replayed == half
    assert (replayed.text, replayed.user_name, replayed.server_id) == ("hi \ufffd", "Ann \ufffd", "8\ufffd")
    assert replayed.attachments[0] == Attachment(kind="document\ufffd", name="report\ufffd.pdf",
                                                 mime_type="application/\ufffd", ref="file-\ufffd", size=10)  # fmt: skip


def test_valid_text_is_kept_as_it_is() -> None:
    text = "naïve 日本語 and a whole emoji \U0001f600"
    assert message(text=text, user_name="Zoë").text == text


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"user_id": 7}, "InboundMessage.user_id must be text, not int"),
        ({"text": None}, "InboundMessage.text must be text, not NoneType"),
        ({"server_id": {"id": "T1"}}, "InboundMessage.server_id must be text, not dict"),
        ({"chat_type": "dm"}, "InboundMessage.chat_type must be ChatType, not str"),
        ({"mentioned": "yes"}, "InboundMessage.mentioned must be bool, not str"),
        ({"attachments": [Attachment(kind="photo")]}, "InboundMessage.attachments must be a tuple, not list"),
        ({"attachments": ({"kind": "photo"},)}, "InboundMessage.attachments must hold Attachment values, not dict"),
        ({"timestamp": "1700000000.1"}, "InboundMessage.timestamp must be a number of seconds, not str"),
    ],
)
def test_a_field_of_the_wrong_type_is_refused_by_name(fields: dict[str, object], named: str) -> None:
    with pytest.raises(TypeError, match=named):
        message(**fields)


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"name": 5}, "Attachment.name must be text, not int"),
        ({"size": "big"}, "Attachment.size must be int, not str"),
        ({"size": True}, "Attachment.size must be int, not bool"),
    ],
)
def test_an_attachment_field_of_the_wrong_type_is_refused_by_name(fields: dict[str, object], named: str) -> None:
    with pytest.raises(TypeError, match=named):
        Attachment(kind="document", **fields)  # type: ignore[arg-type]


def test_a_timestamp_that_is_no_finite_number_is_refused() -> None:
    with pytest.raises(ValueError, match="InboundMessage.timestamp must be a finite number"):
        message(timestamp=float("nan"))
