"""The short turn id gateway.log shows: stable across versions, so old and new log lines of a turn match."""

from __future__ import annotations

import uuid

import pytest

from gateway.turns import short_turn_id


@pytest.mark.parametrize("turn_id", ["telegram:1234", "slack:C1:1700000000.000100", "discord:99", "webchat:ünï"])
def test_short_turn_id_is_the_start_of_the_uuid5(turn_id: str) -> None:
    assert short_turn_id(turn_id) == uuid.uuid5(uuid.NAMESPACE_URL, turn_id).hex[:8]
    assert short_turn_id(turn_id) != short_turn_id(turn_id + "x")
