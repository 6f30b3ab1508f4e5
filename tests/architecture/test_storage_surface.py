"""Code outside ``storage`` asks a store only for what the storage contract (``storage/contract.py``) offers.

Every engine implements ``StorageEngine``; a call the gateway, the CLI or a benchmark makes to anything
else (a SQLite-only method, a private attribute) would work on one engine and break on the other. The
scan reads the source (no import): in each module that imports from ``storage``, every attribute read
on a name ``store`` or on an attribute ``store``/``_store`` (``self._store.x``), and on its ``pairing``,
must be a member of the contract. ``Store.open`` is the one call to the class itself: opening takes
engine-specific arguments, so it is each engine's own (``storage.url`` will choose the engine).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from storage import PairingStorage, StorageEngine

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("gateway", "bench")
"""The gateway (with its CLI, ``gateway/operations/cli``, and the agent's wiring) and the benchmarks."""
STORE_NAMES = frozenset({"store", "_store"})
CLASS_CALLS = frozenset({"open"})


def contract_members(protocol: type) -> set[str]:
    return {name for name, value in vars(protocol).items() if callable(value) or isinstance(value, property)}


def is_store(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id in STORE_NAMES) or (
        isinstance(node, ast.Attribute) and node.attr in STORE_NAMES
    )


def imports_storage(tree: ast.Module) -> bool:
    return any(
        (isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "storage")
        or (isinstance(node, ast.Import) and any(alias.name.split(".")[0] == "storage" for alias in node.names))
        for node in ast.walk(tree)
    )


def store_uses(source: str) -> Iterator[tuple[str, str, int]]:
    """``(where, name, line)`` for each attribute read on a store (``store``), its pairing state (``pairing``)
    or the ``Store`` class (``class``) in ``source``."""
    tree = ast.parse(source)
    if not imports_storage(tree):
        return
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        if is_store(node.value):
            yield "store", node.attr, node.lineno
        elif isinstance(node.value, ast.Attribute) and node.value.attr == "pairing" and is_store(node.value.value):
            yield "pairing", node.attr, node.lineno
        elif isinstance(node.value, ast.Name) and node.value.id == "Store":
            yield "class", node.attr, node.lineno


def outside_the_contract(source: str) -> list[str]:
    allowed = {
        "store": contract_members(StorageEngine),
        "pairing": contract_members(PairingStorage),
        "class": set(CLASS_CALLS),
    }
    uses = sorted(store_uses(source), key=lambda use: use[2])
    return [f"{where}.{name} (line {line})" for where, name, line in uses if name not in allowed[where]]


def test_the_gateway_cli_and_bench_use_only_the_storage_contract() -> None:
    found: dict[str, list[str]] = {}
    uses = 0
    for package in SCANNED:
        for path in sorted((ROOT / package).rglob("*.py")):
            source = path.read_text(encoding="utf-8")
            uses += sum(1 for _ in store_uses(source))
            if problems := outside_the_contract(source):
                found[str(path.relative_to(ROOT))] = problems
    assert found == {}
    assert uses > 80  # the scan sees the store calls (115 today), not an empty tree


def test_a_call_outside_the_contract_is_found() -> None:
    source = (
        "from storage import Store\n"
        "async def f(self, store: Store) -> None:\n"
        "    await store.inbox_accept('telegram', '1', 'telegram:1', {})\n"
        "    await self._store._engine.probe()\n"
        "    await self._store.pairing.take_code('telegram', 'ABC', 0.0)\n"
        "    await store.pairing.forget_everyone()\n"
        "    await Store.vacuum()\n"
    )
    assert outside_the_contract(source) == [
        "store._engine (line 4)", "pairing.forget_everyone (line 6)", "class.vacuum (line 7)",
    ]  # fmt: skip
