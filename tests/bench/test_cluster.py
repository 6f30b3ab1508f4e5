"""``bench.cluster`` with tiny numbers: its closed-loop conversations count every turn through real gateways (one
on SQLite, and two replicas on PostgreSQL), a kill of the poller's owner is measured, and its verdicts judge the
figures against the issue's targets."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.cluster import Run, failover, throughput, verdicts
from tests.e2e_cluster.conversations import echo
from tests.e2e_cluster.replicas import QUICK_TIMINGS
from tests.fakes.model_server import ModelServer
from tests.fakes.postgres_server import PostgresServer

pytestmark = pytest.mark.timeout(300)  # real gateway processes, and a replica's expiry


async def test_one_gateway_on_sqlite_answers_every_turn_of_the_closed_loop(
    tmp_path: Path, model_server: ModelServer
) -> None:
    echo(model_server)
    async with Run(tmp_path, model_server, None, "sqlite") as run:
        rate, counted = await throughput(run, replicas=0, chats=3, per_chat=2)
        assert len(run.telegram.sent) == 3 * 3  # the warm-up round and two timed ones
    assert rate > 0 and (counted.lost, counted.duplicated, counted.out_of_order) == ([], [], {})


async def test_two_replicas_share_the_turns_and_a_kill_of_the_poller_owner_is_measured(
    tmp_path: Path, model_server: ModelServer, postgres: PostgresServer
) -> None:
    echo(model_server)
    async with Run(tmp_path, model_server, postgres, "two") as run:
        rate, counted = await throughput(run, replicas=2, chats=4, per_chat=2)
    assert rate > 0 and (counted.lost, counted.duplicated, counted.out_of_order) == ([], [], {})
    async with Run(tmp_path, model_server, postgres, "failover") as run:
        moved, counted = await failover(run, kills=1, chats=3, timings=QUICK_TIMINGS)
    assert len(moved) == 1 and moved[0] > 0
    assert (counted.lost, counted.duplicated, counted.out_of_order) == ([], [], {})


def test_the_targets_are_no_collapse_a_quick_failover_and_nothing_lost() -> None:
    good = {"turns_per_s_1": 30.0, "turns_per_s_3": 21.0, "failover_s_p50": 17.0, "lost": 0, "duplicated": 0,
            "out_of_order": 0}  # fmt: skip
    assert all(verdicts(good).values())
    assert verdicts(good | {"turns_per_s_3": 20.9})["turns_per_s_3"] is False
    assert verdicts(good | {"failover_s_p50": 20.5})["failover_s_p50"] is False
    assert verdicts(good | {"out_of_order": 1})["out_of_order"] is False
