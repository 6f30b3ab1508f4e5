"""Just enough Dockerfile parsing for the deploy tests: instructions, with continuation lines joined."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Instruction:
    keyword: str
    """Upper case: FROM, RUN, USER, ..."""
    args: str
    line: int

    def words(self) -> list[str]:
        """The arguments as a list: the JSON (exec) form when used, else shell-split."""
        if self.args.startswith("["):
            return list(json.loads(self.args))
        return shlex.split(self.args)


def parse(path: Path = REPO / "Dockerfile") -> list[Instruction]:
    instructions: list[Instruction] = []
    pending, start = "", 0
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue  # comments may sit between continuation lines
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        keyword, _, args = (pending + line).partition(" ")
        instructions.append(Instruction(keyword.upper(), args.strip(), start))
        pending = ""
    return instructions


def stages(instructions: list[Instruction]) -> list[list[Instruction]]:
    """The instructions of each build stage, FROM first."""
    found: list[list[Instruction]] = []
    for instruction in instructions:
        if instruction.keyword == "FROM":
            found.append([])
        if found:
            found[-1].append(instruction)
    return found
