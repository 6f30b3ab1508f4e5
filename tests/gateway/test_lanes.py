"""Lanes: strict order per session, sessions in parallel, coalescing, interrupt and stop."""

from __future__ import annotations

import asyncio

from gateway.inbound.lanes import Lanes
from gateway.tasks import TaskTracker
from tests.waiting import eventually


class Turns:
    """Records each turn's batch; a turn blocks until released when ``hold`` is set."""

    def __init__(self) -> None:
        self.batches: list[tuple[str, list[str]]] = []
        self.running: set[str] = set()
        self.max_parallel = 0
        self.hold = asyncio.Event()
        self.hold.set()
        self.started = asyncio.Event()
        self.cancelled: list[list[str]] = []

    async def __call__(self, key: str, batch: list[str]) -> None:
        self.running.add(key)
        self.max_parallel = max(self.max_parallel, len(self.running))
        self.started.set()
        try:
            await self.hold.wait()
            await asyncio.sleep(0)
            self.batches.append((key, batch))
        except asyncio.CancelledError:
            self.cancelled.append(batch)
            raise
        finally:
            self.running.discard(key)


async def settle(tracker: TaskTracker) -> None:
    await tracker.drain(timeout=5)


async def test_messages_of_a_session_run_in_order_and_sessions_in_parallel() -> None:
    tracker, turns = TaskTracker(), Turns()
    lanes: Lanes[str] = Lanes(turns, tracker)
    turns.hold.clear()
    for session in ("a", "b", "c", "d"):
        lanes.submit(session, f"{session}1")
    await eventually(lambda: len(turns.running) == 4, "every session's turn to start")
    assert turns.max_parallel == 4  # every session's turn is under way (the agent limit is in tests of the turn)
    for session in ("a", "b"):
        lanes.submit(session, f"{session}2")
    turns.hold.set()
    await settle(tracker)
    per_session = {k: [m for key, batch in turns.batches if key == k for m in batch] for k in "abcd"}
    assert per_session == {"a": ["a1", "a2"], "b": ["b1", "b2"], "c": ["c1"], "d": ["d1"]}
    assert len(lanes) == 0  # idle lanes are dropped


async def test_messages_arriving_during_a_turn_coalesce_into_the_next() -> None:
    tracker, turns = TaskTracker(), Turns()
    lanes: Lanes[str] = Lanes(turns, tracker, busy="queue")
    turns.hold.clear()
    lanes.submit("s", "first")
    await turns.started.wait()
    for text in ("second", "third", "fourth"):
        lanes.submit("s", text)
    assert lanes.is_busy("s") and lanes.queued() == 3
    turns.hold.set()
    await settle(tracker)
    assert turns.batches == [("s", ["first"]), ("s", ["second", "third", "fourth"])]


async def test_rapid_messages_within_the_debounce_window_are_one_turn() -> None:
    tracker, turns = TaskTracker(), Turns()
    lanes: Lanes[str] = Lanes(turns, tracker, debounce=0.1)
    for text in ("one", "two", "three"):
        lanes.submit("s", text)
        await asyncio.sleep(0.02)  # pacing, part of the scenario: a user typing, well within the debounce window
    await settle(tracker)
    assert turns.batches == [("s", ["one", "two", "three"])]


async def test_interrupt_mode_cancels_the_running_turn() -> None:
    tracker, turns = TaskTracker(), Turns()
    lanes: Lanes[str] = Lanes(turns, tracker, busy="interrupt")
    turns.hold.clear()
    lanes.submit("s", "long task")
    await turns.started.wait()
    lanes.submit("s", "actually, do this")
    await eventually(lambda: turns.cancelled, "the running turn to be cancelled")
    turns.hold.set()
    await settle(tracker)
    assert turns.cancelled == [["long task"]]
    assert turns.batches == [("s", ["actually, do this"])]


async def test_stop_cancels_only_that_session() -> None:
    tracker, turns = TaskTracker(), Turns()
    lanes: Lanes[str] = Lanes(turns, tracker)
    turns.hold.clear()
    lanes.submit("s", "x")
    lanes.submit("t", "y")
    await eventually(lambda: turns.running == {"s", "t"}, "both turns to start")
    assert lanes.stop("s") is True
    assert lanes.stop("nothing-running") is False
    turns.hold.set()
    await settle(tracker)
    assert turns.cancelled == [["x"]] and turns.batches == [("t", ["y"])]


async def test_a_failing_turn_does_not_stop_the_lane() -> None:
    tracker = TaskTracker()
    seen: list[list[str]] = []

    async def flaky(key: str, batch: list[str]) -> None:
        seen.append(batch)
        if batch == ["boom"]:
            raise RuntimeError("turn failed")

    lanes: Lanes[str] = Lanes(flaky, tracker)
    lanes.submit("s", "boom")
    await eventually(lambda: seen, "the failing turn to run")
    lanes.submit("s", "after")
    await settle(tracker)
    assert seen == [["boom"], ["after"]]


async def held_turn_with_one_queued(queued: str) -> tuple[TaskTracker, Turns, Lanes[str], list[list[str]]]:
    """Session "s" runs turn "x" (held) with ``queued`` waiting behind it; stopped batches are collected."""
    tracker, turns = TaskTracker(), Turns()
    stopped: list[list[str]] = []

    async def on_cancelled(key: str, batch: list[str]) -> None:
        stopped.append(batch)

    lanes: Lanes[str] = Lanes(turns, tracker, on_cancelled=on_cancelled)
    turns.hold.clear()
    lanes.submit("s", "x")
    await turns.started.wait()
    lanes.submit("s", queued)
    return tracker, turns, lanes, stopped


async def test_a_stopped_turn_is_reported_and_the_lane_goes_on() -> None:
    tracker, turns, lanes, stopped = await held_turn_with_one_queued("next")
    assert lanes.stop("s") is True
    await eventually(lambda: turns.cancelled, "the stopped turn to be cancelled")
    turns.hold.set()
    await settle(tracker)
    assert stopped == [["x"]] and turns.cancelled == [["x"]] and turns.batches == [("s", ["next"])]


async def test_shutdown_cancels_the_running_turn_without_treating_it_as_stopped() -> None:
    tracker, turns, _, stopped = await held_turn_with_one_queued("queued behind it")
    await tracker.drain(timeout=0.05)  # what still runs after the drain timeout is cancelled
    assert turns.cancelled == [["x"]] and stopped == [] and turns.batches == []
    assert len(tracker) == 0


async def test_a_held_lane_starts_no_turn_until_released() -> None:
    tracker = TaskTracker()
    turns = Turns()
    lanes: Lanes[str] = Lanes(turns, tracker)
    async with lanes.exclusive("a") as held:
        assert held
        async with lanes.exclusive("a") as again:
            assert not again  # one holder at a time
        lanes.submit("a", "sent while held")
        lanes.submit("b", "other session")
        await eventually(lambda: turns.batches, "the other session's turn")  # "a", submitted first, had its chance
        assert turns.batches == [("b", ["other session"])]
    await settle(tracker)
    assert turns.batches[-1] == ("a", ["sent while held"]) and len(lanes) == 0
    turns.hold.clear()
    turns.started.clear()
    lanes.submit("a", "slow")
    await turns.started.wait()
    async with lanes.exclusive("a") as held:
        assert not held  # a turn is running
    turns.hold.set()
    await settle(tracker)
    async with lanes.exclusive("c") as held:
        assert held
    assert len(lanes) == 0  # holding an idle session leaves nothing behind


async def test_stop_during_the_debounce_window_drops_the_waiting_messages() -> None:
    tracker, turns = TaskTracker(), Turns()
    stopped: list[list[str]] = []

    async def on_cancelled(key: str, batch: list[str]) -> None:
        stopped.append(batch)

    lanes: Lanes[str] = Lanes(turns, tracker, debounce=0.3, on_cancelled=on_cancelled)
    lanes.submit("s", "first")
    lanes.submit("s", "second")
    assert lanes.stop("s") is True
    await settle(tracker)
    assert stopped == [["first", "second"]] and turns.batches == [] and len(lanes) == 0
    lanes.submit("s", "after")  # the session goes on as usual
    await settle(tracker)
    assert turns.batches == [("s", ["after"])]


async def test_the_queue_wait_is_the_oldest_message_waiting_behind_the_running_turn() -> None:
    tracker, turns = TaskTracker(), Turns()
    waits: list[float] = []
    lanes: Lanes[str] = Lanes(turns, tracker, on_wait=waits.append)
    turns.hold.clear()
    lanes.submit("a", "a1")
    await turns.started.wait()
    lanes.submit("a", "a2")  # waits behind a1's turn ...
    await asyncio.sleep(0.2)  # the time a2 waits, which the wait measured must include
    lanes.submit("a", "a3")  # ... and a3 joins it, but the wait counts from a2
    turns.hold.set()
    await settle(tracker)
    assert [batch for _, batch in turns.batches] == [["a1"], ["a2", "a3"]]
    assert len(waits) == 2 and waits[1] >= 0.2  # from a2 on, not from a3


async def test_a_lane_taken_again_the_moment_it_is_released_still_starts_no_turn() -> None:
    """A second hold (a second /compress) taken in the same step as the first is released keeps the turn waiting."""
    tracker, turns = TaskTracker(), Turns()
    lanes: Lanes[str] = Lanes(turns, tracker)
    second = asyncio.Event()
    release_second = asyncio.Event()

    async def hold_again() -> None:
        async with lanes.exclusive("a") as held:
            assert held
            second.set()
            await release_second.wait()

    async with lanes.exclusive("a") as held:
        assert held
        lanes.submit("a", "sent while held")
        await asyncio.sleep(0)  # the lane's worker is waiting for the hold to end
        taker = asyncio.ensure_future(hold_again())  # queued to run right after the release below
    await second.wait()
    for _ in range(5):
        await asyncio.sleep(0)  # steps in which a worker that missed the second hold would start the turn
    assert turns.batches == []  # no turn while the second hold lasts
    release_second.set()
    await taker
    await settle(tracker)
    assert turns.batches == [("a", ["sent while held"])]


async def test_an_item_that_lingers_holds_the_lane_until_its_group_is_complete() -> None:
    """An album's photo arrives: the lane waits the album's quiet time (longer than the debounce, here
    none) for the rest of the album, so the photos sent together are one turn."""
    tracker, turns = TaskTracker(), Turns()
    released = asyncio.Event()

    def linger(item: str) -> float:
        return 30.0 if item.startswith("album") and not released.is_set() else 0.0

    lanes: Lanes[str] = Lanes(turns, tracker, linger=linger)
    lanes.submit("a", "album-1")
    await asyncio.sleep(0.05)  # pacing: the album's next photo comes a moment later
    lanes.submit("a", "album-2")
    lanes.submit("b", "plain")  # a message outside any album is not held
    await eventually(lambda: ("b", ["plain"]) in turns.batches, "the plain message's turn")
    assert not [batch for key, batch in turns.batches if key == "a"]
    released.set()
    lanes.submit("a", "album-3")  # the last photo: the album no longer asks for quiet
    await settle(tracker)
    assert [batch for key, batch in turns.batches if key == "a"] == [["album-1", "album-2", "album-3"]]
