"""The dependency rules between Switchboard's packages, and the check that finds every import breaking one.

Dependencies point one way (README, "How it fits together"): adapters know only their own
contract; the gateway uses the agent, storage, config and the adapters; the agent knows no
platform and no database, and is handed what it needs; storage and config import nothing of ours.

The import graph comes from grimp (the engine of import-linter): it reads the source without
importing it, resolves relative imports, and sees every import statement, at module level,
inside functions, and under ``if TYPE_CHECKING:``. Type-only imports count: they tie the packages
together just the same (a reader must know the other package; a rename there breaks this one).
Imports made at run time by name (``importlib.import_module``) are not seen.

import-linter itself would express these rules, but it brings ``rich`` into the test environment,
and structlog renders exceptions through ``rich`` whenever it is installed: the tests would then
run with a console output production does not have. grimp has no dependencies.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

import grimp

PACKAGES = ("adapters", "agent", "config", "gateway", "storage")
"""Our packages: the ones whose imports are checked."""


@dataclass(frozen=True)
class Rule:
    """``importer`` (a package, with everything in it) must not import any of ``forbidden``.

    A forbidden name is a package or module with everything in it (``"storage"``, ``"aiogram"``);
    ``"agent.*"`` is everything inside ``agent`` but not the package itself, i.e. its surface.
    """

    says: str
    importer: str
    forbidden: tuple[str, ...]

    def forbids(self, module: str) -> bool:
        return any(_within(module, pattern) for pattern in self.forbidden)


RULES = (
    Rule(
        "adapters/ imports nothing of gateway, agent, storage or config",
        "adapters",
        ("gateway", "agent", "storage", "config"),
    ),
    Rule(
        "agent/ imports no platform SDK (aiogram, discord, slack_bolt, slack_sdk) and nothing of storage "
        "(nor aiosqlite, sqlite3)",
        "agent",
        ("aiogram", "discord", "slack_bolt", "slack_sdk", "storage", "aiosqlite", "sqlite3"),
    ),
    Rule(
        "agent/ imports nothing of gateway, adapters or config: what it needs is passed in",
        "agent",
        ("gateway", "adapters", "config"),
    ),
    Rule(
        "no platform in gateway/: of adapters/ it imports the contract and the HTTP listener only, and no "
        "platform SDK (each adapter is loaded by name from its config section)",
        "gateway",
        ("adapters.telegram", "adapters.discord", "adapters.slack", "aiogram", "discord", "slack_bolt", "slack_sdk"),
    ),
    Rule("storage/ imports nothing of ours", "storage", ("gateway", "agent", "adapters", "config")),
    Rule("config/ imports nothing of ours", "config", ("gateway", "agent", "adapters", "storage")),
    Rule(
        "gateway/ uses the agent only through its package surface: `from agent import ...`, never agent.<module>",
        "gateway",
        ("agent.*",),
    ),
)

# Imports that break a rule and are let through, each by name (none today). An allowance that
# matches no import any more is reported too, so none outlives its reason.
ALLOWED: frozenset[tuple[str, str]] = frozenset()


def problems(
    packages: Iterable[str] = PACKAGES,
    rules: Iterable[Rule] = RULES,
    allowed: Collection[tuple[str, str]] = ALLOWED,
) -> list[str]:
    """Every import that breaks a rule, and every allowance no import uses, one line each.

    An import reads ``path:line: the statement -> imported module; breaks: the rule``, the path
    relative to the folder holding the packages.
    """
    packages = tuple(packages)
    graph = grimp.build_graph(*packages, include_external_packages=True, cache_dir=None)
    found: list[str] = []
    used: set[tuple[str, str]] = set()
    for rule in rules:
        for importer in sorted({rule.importer, *graph.find_descendants(rule.importer)}):
            for imported in sorted(graph.find_modules_directly_imported_by(importer)):
                if not rule.forbids(imported):
                    continue
                if (importer, imported) in allowed:
                    used.add((importer, imported))
                    continue
                for detail in graph.get_import_details(importer=importer, imported=imported):
                    found.append(
                        f"{_path(importer)}:{detail['line_number']}: {detail['line_contents'].strip()} "
                        f"-> {imported}; breaks: {rule.says}"
                    )
    for importer, imported in sorted(set(allowed) - used):
        found.append(f"allowance ({importer} -> {imported}) matches no import any more: remove it from ALLOWED")
    return found


def _within(module: str, pattern: str) -> bool:
    if pattern.endswith(".*"):
        return module.startswith(pattern[:-1])
    return module == pattern or module.startswith(pattern + ".")


def _path(module: str) -> str:
    """The file of one of our modules, relative to the folder that holds its package."""
    top, *rest = module.split(".")
    spec = importlib.util.find_spec(top)
    assert spec is not None and spec.submodule_search_locations, f"{top} is not a package"
    package = Path(next(iter(spec.submodule_search_locations)))
    as_module = package.joinpath(*rest).with_suffix(".py")
    file = as_module if rest and as_module.is_file() else package.joinpath(*rest, "__init__.py")
    return file.relative_to(package.parent).as_posix()


if __name__ == "__main__":
    lines = problems()
    print("\n".join(lines) or "every dependency rule holds")
    raise SystemExit(1 if lines else 0)
