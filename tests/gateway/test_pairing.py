"""Pairing: codes, rate limit, single use, lockout, and the operator's CLI."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from gateway.operations.cli import main
from gateway.inbound.pairing import ALPHABET, CODE_LENGTH, ApprovalOutcome, Pairing
from storage import Store


@pytest_asyncio.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    """The store, closed even when a test fails (an open one would keep the test run from ending)."""
    opened = await Store.open(tmp_path / "state.db")
    try:
        yield opened
    finally:
        await opened.close()


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_codes_rate_limit_single_use_and_platform_scope(store: Store) -> None:
    clock = Clock()
    pairing = Pairing(store, clock=clock)
    code = await pairing.offer("telegram", "42", "Ada", "42")
    assert code is not None and len(code) == CODE_LENGTH and set(code) <= set(ALPHABET)
    assert await pairing.offer("telegram", "42", "Ada", "42") is None  # one per 10 minutes
    assert (await pairing.approve("discord", code)).outcome is ApprovalOutcome.UNKNOWN_CODE
    approval = await pairing.approve("telegram", code.lower())
    assert approval.outcome is ApprovalOutcome.APPROVED and approval.user_id == "42"
    assert await pairing.is_approved("telegram", "42") and not await pairing.is_approved("discord", "42")
    assert (await pairing.approve("telegram", code)).outcome is ApprovalOutcome.UNKNOWN_CODE  # single use
    clock.now += 601
    assert await pairing.offer("telegram", "43", "Bob", "43") is not None
    assert await pairing.revoke("telegram", "42") and not await pairing.is_approved("telegram", "42")


async def test_codes_expire_after_an_hour(store: Store) -> None:
    clock = Clock()
    pairing = Pairing(store, clock=clock)
    code = await pairing.offer("slack", "U1", "Cy", "D1")
    clock.now += 3601
    assert (await pairing.approve("slack", code or "")).outcome is ApprovalOutcome.UNKNOWN_CODE


async def test_five_wrong_codes_lock_approvals_for_an_hour(store: Store) -> None:
    clock = Clock()
    pairing = Pairing(store, clock=clock)
    code = await pairing.offer("discord", "7", "Dee", "7")
    for _ in range(5):
        assert (await pairing.approve("discord", "WRONGCODE")).outcome is ApprovalOutcome.UNKNOWN_CODE
    assert (await pairing.approve("discord", code or "")).outcome is ApprovalOutcome.LOCKED
    assert (await pairing.approve("telegram", "ANYTHING")).outcome is ApprovalOutcome.UNKNOWN_CODE  # other platform
    clock.now += 3601  # the lock is over (and the old code has expired with it)
    fresh = await pairing.offer("discord", "7", "Dee", "7")
    assert (await pairing.approve("discord", fresh or "")).outcome is ApprovalOutcome.APPROVED


async def test_the_lock_lasts_an_hour_from_the_fifth_wrong_code(store: Store) -> None:
    clock = Clock()
    pairing = Pairing(store, clock=clock)
    for _ in range(4):
        assert (await pairing.approve("discord", "WRONGCODE")).outcome is ApprovalOutcome.UNKNOWN_CODE
    clock.now += 50 * 60  # the fifth comes 50 minutes after the first four
    fifth = await pairing.approve("discord", "WRONGCODE")
    assert fifth.outcome is ApprovalOutcome.UNKNOWN_CODE and "now locked for an hour" in fifth.message
    clock.now += 20 * 60  # the first four are over an hour old now; the lock still holds
    code = await pairing.offer("discord", "7", "Dee", "7")
    locked = await pairing.approve("discord", code or "")
    assert locked.outcome is ApprovalOutcome.LOCKED and "try again in 40 minutes" in locked.message
    clock.now += 40 * 60 + 1
    assert (await pairing.approve("discord", code or "")).outcome is ApprovalOutcome.APPROVED


async def test_a_code_typed_with_spaces_or_hyphens_is_accepted_and_approval_ends_older_codes(store: Store) -> None:
    clock = Clock()
    pairing = Pairing(store, clock=clock)
    older = await pairing.offer("telegram", "42", "Ada", "42") or ""
    clock.now += 601
    newer = await pairing.offer("telegram", "42", "Ada", "42") or ""
    typed = f" {newer[:4].lower()} - {newer[4:]} "
    assert (await pairing.approve("telegram", typed)).outcome is ApprovalOutcome.APPROVED
    assert await pairing.revoke("telegram", "42")
    assert (await pairing.approve("telegram", older)).outcome is ApprovalOutcome.UNKNOWN_CODE  # used up by the approval


async def offered_code(home: Path) -> str:
    """A code offered to telegram user 42 (Ada), in the store under ``home``, as a DM from them would get."""
    store = await Store.open(home / "state.db")
    try:
        return await Pairing(store).offer("telegram", "42", "Ada", "42") or ""
    finally:
        await store.close()


def test_operator_cli_lists_and_approves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SWITCHBOARD_HOME", str(tmp_path))

    code = asyncio.run(offered_code(tmp_path))
    assert main(["pairing", "list"]) == 0
    out = capsys.readouterr().out
    assert code in out and "user 42 (Ada)" in out
    assert main(["pairing", "approve", "telegram", "NOPE2345"]) == 1
    assert "Not approved" in capsys.readouterr().out
    assert main(["pairing", "approve", "telegram", code]) == 0
    assert "Approved telegram user 42 (Ada)" in capsys.readouterr().out
    assert main(["pairing", "list", "--json"]) == 0
    assert '"user_id": "42"' in capsys.readouterr().out
    assert main(["pairing", "revoke", "telegram", "42"]) == 0
    assert main(["pairing", "revoke", "telegram", "42"]) == 1


def test_operator_unlocks_a_locked_platform_from_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SWITCHBOARD_HOME", str(tmp_path))

    code = asyncio.run(offered_code(tmp_path))
    assert main(["pairing", "unlock", "telegram"]) == 0
    assert "were not locked" in capsys.readouterr().out
    for _ in range(5):
        assert main(["pairing", "approve", "telegram", "WRONG234"]) == 1
    assert "switchboard pairing unlock telegram" in capsys.readouterr().out  # the fifth says how to undo it
    assert main(["pairing", "approve", "telegram", code]) == 1
    refused = capsys.readouterr().out
    assert "locked" in refused and "switchboard pairing unlock telegram" in refused

    assert main(["pairing", "unlock", "telegram"]) == 0
    unlocked = capsys.readouterr().out
    assert "Unlocked approvals for telegram" in unlocked and "5 wrong codes" in unlocked
    assert main(["pairing", "approve", "telegram", code]) == 0
    assert "Approved telegram user 42 (Ada)" in capsys.readouterr().out
