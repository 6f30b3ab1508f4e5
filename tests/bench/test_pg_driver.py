"""``bench.pg_driver`` on a few rows: every driver it compares stores each append once, and reads a history back."""

from __future__ import annotations

import pytest

from bench.pg_driver import DRIVERS, MODULES, available, one_round


@pytest.mark.parametrize("name", DRIVERS)
async def test_each_driver_stores_every_append_once(postgres_dsn: str, name: str) -> None:
    if not available(name):
        pytest.skip(f"{name} is not installed (the bench extra)")

    figures = await one_round(MODULES[name][1](), postgres_dsn, per_writer=2, reads=3)

    assert figures["lost_or_duplicated"] == 0
    assert figures["history_rows"] == 2
    assert figures["appends_per_s"] > 0
