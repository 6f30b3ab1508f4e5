"""The packages keep the dependency rules (tests/architecture/rules.py), and the check can fail."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.architecture.rules import RULES, problems

REPO = Path(__file__).resolve().parents[2]


def test_every_import_keeps_the_dependency_rules() -> None:
    found = problems()
    if found:
        pytest.fail("imports that break a dependency rule:\n" + "\n".join(found), pytrace=False)


# A made-up tree with the packages' names: one import breaking each rule, in each place an
# import can hide, beside imports the rules allow.
BROKEN_TREE = {
    "adapters/__init__.py": "",
    "adapters/ok.py": "import aiogram\nfrom adapters import base\n",
    "adapters/base.py": "from gateway.events import InboundMessage\n",
    "adapters/telegram/__init__.py": "class TelegramAdapter:\n    pass\n",
    "adapters/late.py": "def load():\n    from storage import Store\n    return Store\n",
    "agent/__init__.py": "from agent.core import Agent\n",
    "agent/core.py": "import structlog\n\nclass Agent:\n    pass\n",
    "agent/sdk.py": "import discord\n",
    "agent/typed.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from storage import Store\n",
    "agent/db.py": "def open_db():\n    import sqlite3\n    return sqlite3\n",
    "agent/wiring.py": "from . import core\nfrom config import Settings\n",
    "storage/__init__.py": "class Store:\n    pass\n",
    "storage/upward.py": "import sqlite3\n\nfrom config.models import Settings\n",
    "config/__init__.py": "",
    "config/models.py": "class Settings:\n    pass\n",
    "config/cycle.py": "import yaml\nimport gateway.app\n",
    "gateway/__init__.py": "",
    "gateway/events.py": "class InboundMessage:\n    pass\n",
    "gateway/app.py": "from agent import Agent\nfrom storage import Store\nfrom agent.core import Agent as Core\n",
    "gateway/lazy.py": "def build():\n    from agent import core\n    return core\n",
    "gateway/loader.py": "import importlib\n\nfrom adapters import http_listener\nfrom adapters.base import Adapter\n",
    "gateway/platform.py": "from adapters.telegram import TelegramAdapter\n",
    "gateway/sdk.py": "def probe():\n    import aiogram\n    return aiogram\n",
}

EXPECTED = {
    ("adapters/base.py:1", "adapters/"),
    ("adapters/late.py:2", "adapters/"),
    ("agent/sdk.py:1", "agent/ imports no platform SDK"),
    ("agent/typed.py:4", "agent/ imports no platform SDK"),
    ("agent/db.py:2", "agent/ imports no platform SDK"),
    ("agent/wiring.py:2", "agent/ imports nothing of gateway"),
    ("storage/upward.py:3", "storage/"),
    ("config/cycle.py:2", "config/"),
    ("gateway/app.py:3", "gateway/"),
    ("gateway/lazy.py:2", "gateway/"),
    ("gateway/platform.py:1", "no platform in gateway/"),
    ("gateway/sdk.py:2", "no platform in gateway/"),
}


def _check_tree(tmp_path: Path, allowed: set[tuple[str, str]]) -> list[str]:
    """problems() on the tree under ``tmp_path``, in a process where its packages shadow ours."""
    for name, text in BROKEN_TREE.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    code = textwrap.dedent(f"""
        from tests.architecture.rules import problems
        print("\\n".join(problems(allowed={allowed!r})))
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_the_check_names_file_line_and_rule_of_each_breaking_import(tmp_path: Path) -> None:
    found = _check_tree(tmp_path, allowed=set())

    assert {(line.split(": ", 1)[0], _rule_of(line)) for line in found} == {
        (where, next(r.says for r in RULES if r.says.startswith(prefix))) for where, prefix in EXPECTED
    }
    assert "gateway/app.py:3: from agent.core import Agent as Core -> agent.core; breaks: gateway/" in "\n".join(found)


def test_an_allowance_lets_its_import_through_and_is_reported_once_unused(tmp_path: Path) -> None:
    found = _check_tree(tmp_path, allowed={("adapters.base", "gateway.events"), ("adapters.gone", "gateway.events")})

    assert not [line for line in found if line.startswith("adapters/base.py")]
    assert "allowance (adapters.gone -> gateway.events) matches no import any more: remove it from ALLOWED" in found


def _rule_of(line: str) -> str:
    return line.split("; breaks: ", 1)[1]
