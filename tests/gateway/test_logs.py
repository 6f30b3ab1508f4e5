"""gateway.log: one line per event, context binding, JSON mode, rotation, and redaction of every secret."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from gateway.operations import log_lines, logs
from gateway.operations.logs import bind, configure_logging

TELEGRAM = "7512345678:AAHk3dY9kq_Zx8Yv7Wf6mN5bL4cK3jH2gF1"
SECRETS = {
    "telegram": TELEGRAM,
    "slack_bot": "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUvWx",
    "slack_app": "xapp-1-A012BCDEF-1234567890123-abcdef0123456789",
    "slack_user": "xoxp-2222222222-3333333333-44444444444-abcdef",
    "openai": "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34",
    "openai_plain": "sk-Zz98Yy76Xx54Ww32Vv10Uu98Tt76",
    "anthropic": "sk-ant-api03-Qw3rTy7UiOp-AsDfGhJkL_ZxCvBnM",
    "discord": "MTIzNDU2Nzg5MDEyMzQ1Njc4.GAbCdE.aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456",
    "configured": "plain-configured-secret-42",
}
# An opaque bearer token has no recognisable shape of its own: it is caught by the header it travels in.
BEARER = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJib3QifQ.c2lnbmF0dXJl"


@pytest.fixture
def log_file(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "logs" / "gateway.log"
    yield path
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()
    structlog.reset_defaults()


def lines(path: Path) -> list[str]:
    for handler in logging.getLogger().handlers:
        handler.flush()
    return path.read_text(encoding="utf-8").splitlines()


def test_text_line_shape_and_context_binding(log_file: Path) -> None:
    configure_logging(file=log_file, console=False)
    log = structlog.get_logger("gateway")
    with bind(platform="telegram", chat="42", session="S1", turn="t-1"):
        log.info("turn.done", **{"in": 1234, "out": 56, "cache_read": 1100, "ms": 842})
        structlog.get_logger("agent").info("model.call", model="claude")
    log.info("after.turn")
    (first, second, after) = lines(log_file)
    assert first.endswith(" info  turn.done platform=telegram chat=42 session=S1 turn=t-1 in=1234 out=56 cache_read=1100 ms=842")
    assert first[:24].endswith("Z") and first[10] == "T"
    assert "turn=t-1" in second and "session=S1" in second
    assert "turn=" not in after and "session=" not in after  # the fields leave with the block


def test_bound_context_reaches_tasks_started_inside(log_file: Path) -> None:
    import asyncio

    configure_logging(file=log_file, console=False)

    async def work() -> None:
        structlog.get_logger("gateway").info("inside.task")

    async def main() -> None:
        with bind(turn="t-9"):
            task = asyncio.create_task(work())
        await task

    asyncio.run(main())
    assert "turn=t-9" in lines(log_file)[0]


def test_exceptions_and_newlines_stay_on_one_line(log_file: Path) -> None:
    configure_logging(file=log_file, console=False)
    log = structlog.get_logger("gateway")
    try:
        raise ValueError("first line\nsecond line")
    except ValueError:
        log.exception("delivery.failed", text="a\nb")
    logging.getLogger("aiogram.dispatcher").error("polling\nstopped", exc_info=RuntimeError("x"))
    found = lines(log_file)
    assert len(found) == 2
    assert 'exc="Traceback' in found[0] and "ValueError: first line\\nsecond line" in found[0]
    assert 'text="a\\nb"' in found[0]
    assert "logger=aiogram.dispatcher" in found[1]


def test_values_with_spaces_are_quoted_and_levels_filtered(log_file: Path) -> None:
    configure_logging(file=log_file, console=False, level="warning")
    log = structlog.get_logger("gateway")
    log.info("hidden")
    log.warning("inbound.ignored", reason="not mentioned in group", empty="")
    (line,) = lines(log_file)
    assert ' warn  inbound.ignored reason="not mentioned in group" empty=""' in line


def test_json_format_writes_one_object_per_line(log_file: Path) -> None:
    configure_logging(file=log_file, console=False, fmt="json")
    with bind(turn="t-2"):
        structlog.get_logger("gateway").info("turn.done", out=5)
    record = json.loads(lines(log_file)[0])
    assert list(record)[:3] == ["ts", "level", "event"]
    assert record["event"] == "turn.done" and record["turn"] == "t-2" and record["out"] == 5


def test_rotation_by_size(log_file: Path) -> None:
    configure_logging(file=log_file, console=False, max_bytes=2000, backups=2)
    log = structlog.get_logger("gateway")
    for index in range(200):
        log.info("filler", index=index, pad="x" * 50)
    rotated = sorted(p.name for p in log_file.parent.iterdir())
    assert rotated == ["gateway.log", "gateway.log.1", "gateway.log.2"]
    assert log_file.stat().st_size <= 2000


def test_a_log_file_that_stops_failing_is_announced_once_with_the_lines_lost(
    log_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The process test (tests/gateway/test_log_file.py) shows the failure side; here the file comes back."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here to stand for a full disk")
    log_file.parent.mkdir(parents=True)
    log_file.symlink_to("/dev/full")
    configure_logging(file=log_file, console=False)
    log = structlog.get_logger("gateway")
    for index in range(5):
        log.warning("lost", index=index)
    log_file.unlink()  # room again: the next line opens a file that takes it
    log.warning("kept")
    said = capsys.readouterr().err.splitlines()
    assert said == [
        f"switchboard: cannot write {log_file}: No space left on device; 1 log line lost so far (said at most once a minute)",
        f"switchboard: {log_file} is written again; 4 more log lines were lost before that",
    ]
    assert [line.split()[2] for line in lines(log_file)] == ["kept"]


def test_numbers_are_written_in_fixed_point(log_file: Path) -> None:
    configure_logging(file=log_file, console=False)
    structlog.get_logger("gateway").info("turn.done", cost=7.5e-05, big=1234567.8, tiny=1.2e-07, ms=842.0, nan=float("nan"))
    (line,) = lines(log_file)
    assert line.endswith(" cost=0.000075 big=1234570 tiny=0.00000012 ms=842 nan=nan"), line


def test_log_file_is_private(log_file: Path) -> None:
    configure_logging(file=log_file, console=False)
    assert (log_file.stat().st_mode & 0o777) == 0o600


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_no_secret_survives_any_logger(log_file: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(file=log_file, console=True, fmt=fmt, secrets=[SECRETS["configured"]])
    native = [structlog.get_logger(name) for name in ("gateway", "agent", "storage", "adapters.telegram")]
    foreign = [logging.getLogger(name) for name in ("aiogram.event", "discord.http", "slack_bolt.AsyncApp", "httpx2", "root")]
    for kind, secret in SECRETS.items():
        for logger in native:
            logger.warning("leak.check", kind=kind, value=secret, url=f"https://api.telegram.org/bot{secret}/getMe")
            logger.warning(f"message text carries {secret}")
            logger.warning("header", headers={"Authorization": f"Bearer {secret}", "x-api-key": secret})
            try:
                raise RuntimeError(f"request failed with token={secret}")
            except RuntimeError:
                logger.exception("leak.exception", kind=kind)
        for logger in foreign:
            logger.warning("library says %s and Authorization: Bearer %s", secret, secret)
            logger.error("library failed", exc_info=RuntimeError(f"bad key {secret}"))
    for logger in [*native, *foreign]:
        logger.warning("request headers: Authorization: Bearer %s", BEARER)
        logger.warning("curl -H 'authorization: bearer %s' https://api.example.org", BEARER)
    written = log_file.read_text(encoding="utf-8") + capsys.readouterr().err
    assert "[REDACTED]" in written
    every = {**SECRETS, "bearer": BEARER}
    leaked = [(kind, line) for kind, secret in every.items() for line in written.splitlines() if secret in line]
    assert leaked == []
    # The parts that are not secret stay readable.
    assert "7512345678:[REDACTED]" in written and "xoxb-[REDACTED]" in written


def test_redactor_leaves_ordinary_text_alone() -> None:
    text = "turn.done in=1234 out=56 tokens=900 model=claude-sonnet-4-6 task=sk-learning path=/usr/bin/ls"
    assert logs.redactor(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "AUTHORIZATION: BEARER abcdefghijklmnop",
        "Api_Key=abcdefghijklmnop",
        "X-API-KEY: abcdefghijklmnop",
        "PASSWORD='abcdefghijklmnop'",
        "Access-Token: abcdefghijklmnop",
        "ſecret=abcdefghijklmnop",  # a long s: the pattern ignores case the Unicode way, so must the clue check
    ],
)
def test_case_insensitive_shapes_are_masked_in_any_case(text: str) -> None:
    masked = logs.redactor(text)
    assert "abcdefghijklmnop" not in masked and "[REDACTED]" in masked


def test_a_logger_cached_on_first_use_follows_later_configuration(log_file: Path) -> None:
    configure_logging(file=log_file, console=False, level="warning")
    log = structlog.get_logger("gateway.test_cached")
    log.info("below.level")  # the first use builds and caches the logger
    log.warning("at.level")
    configure_logging(file=log_file, console=False, level="debug", fmt="json")
    log.debug("now.written", n=1)
    with structlog.testing.capture_logs() as captured:  # tests rely on it seeing cached loggers too
        log.debug("seen.by.capture")
    lines = log_file.read_text(encoding="utf-8").splitlines()
    assert "below.level" not in "".join(lines)
    assert "at.level" in lines[0] and json.loads(lines[-1])["event"] == "now.written"
    assert [entry["event"] for entry in captured] == ["seen.by.capture"]


@pytest.mark.parametrize(
    "created",
    [0.0, 1795331016.4340200, 1795331016.9995, 1795331016.9999996, 1795331016.0000004, 1795331017.1234565, 2**31 + 0.5],
)
def test_timestamps_read_as_the_iso_format_to_the_millisecond(created: float) -> None:
    from datetime import datetime, timezone

    expected = datetime.fromtimestamp(created, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    assert log_lines.utc_stamp(created) == expected
    assert log_lines.utc_stamp(created + 1) != expected  # the cached second moves on
