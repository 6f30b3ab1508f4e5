"""The benchmarks' shared helpers: the CPU steal figure reported next to their results, the options."""

from __future__ import annotations

from pathlib import Path

from bench.common import CpuSteal, loop_name, parse_args
from gateway import event_loop


def stat_line(user: int, idle: int, steal: int) -> str:
    return f"cpu  {user} 0 10 {idle} 0 0 0 {steal} 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n"


def test_steal_is_the_share_of_all_cpu_time_since_the_start(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text(stat_line(user=1000, idle=5000, steal=100))
    meter = CpuSteal(stat)
    stat.write_text(stat_line(user=1600, idle=5300, steal=200))  # 1,000 more jiffies, 100 of them stolen
    assert meter.percent() == 10.0


def test_no_figure_where_it_cannot_be_read(tmp_path: Path) -> None:
    assert CpuSteal(tmp_path / "missing").percent() is None
    stat = tmp_path / "stat"
    stat.write_text("intr 12345\n")
    assert CpuSteal(stat).percent() is None
    stat.write_text(stat_line(user=1, idle=1, steal=0))
    meter = CpuSteal(stat)
    assert meter.percent() is None  # no time has passed


def test_the_loop_option_defaults_to_what_switchboard_run_uses() -> None:
    assert parse_args("x", [], loop=True).loop == "auto"
    assert parse_args("x", ["--quick", "--loop", "asyncio"], loop=True).loop == "asyncio"
    # `python -m bench` hands every benchmark the same arguments: one's option is no other's error
    args = parse_args("x", ["--json", "--loop", "asyncio", "--log-level", "info"])
    assert args.json and not hasattr(args, "loop")


def test_loop_name_says_which_loop_ran() -> None:
    async def name() -> str:
        return loop_name()

    assert event_loop.run(name(), event_loop.loop_factory("asyncio")) == "asyncio"
    assert event_loop.run(name(), event_loop.loop_factory("uvloop")) == "uvloop"
