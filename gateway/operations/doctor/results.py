"""One doctor check's outcome and how it is printed."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass


class Status(enum.Enum):
    OK = "ok"
    FAIL = "FAIL"
    SKIP = "skip"


@dataclass(frozen=True, slots=True)
class Check:
    """What was checked, what was found and, for a failure, what to do about it."""

    status: Status
    name: str
    detail: str
    fix: str | None = None

    @classmethod
    def ok(cls, name: str, detail: str) -> Check:
        return cls(Status.OK, name, detail)

    @classmethod
    def fail(cls, name: str, detail: str, fix: str) -> Check:
        return cls(Status.FAIL, name, detail, fix)

    @classmethod
    def skip(cls, name: str, detail: str) -> Check:
        return cls(Status.SKIP, name, detail)


def render(checks: Sequence[Check]) -> str:
    """``STATUS  name: detail`` per check, the fix after a failure, then a summary line."""
    width = max((len(check.name) for check in checks), default=0)
    lines = []
    for check in checks:
        line = f"{check.status.value:<4}  {check.name.ljust(width)}  {check.detail}"
        if check.fix:
            line = f"{line.rstrip('.')}. Fix: {check.fix}"
        lines.append(line)
    failed = sum(check.status is Status.FAIL for check in checks)
    skipped = sum(check.status is Status.SKIP for check in checks)
    summary = f"{failed} of {len(checks)} checks failed" if failed else f"all {len(checks) - skipped} checks passed"
    lines += ["", summary + (f" ({skipped} skipped)" if skipped else "") + "."]
    return "\n".join(lines)
