"""Every engine's store is a ``StorageEngine``: every member of the contract, with the same signature.

The comparison is structural (``inspect.signature`` with the annotations resolved), so a parameter
renamed, reordered, given another default or another type on either side fails here, and so does a
member turned from a queued write (a plain function returning the writer's future) into a coroutine.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from pathlib import Path

import pytest

import storage
from storage import BackupHooks, PairingStorage, PostgresStore, StorageEngine, Store
from storage.pairing import PairingStore


def members(protocol: type) -> dict[str, object]:
    """The methods and properties ``protocol`` declares (its dunders too, such as ``__aenter__``)."""
    ignored = {"__init__", "__subclasshook__", "__class_getitem__", "__init_subclass__"}
    return {
        name: value
        for name, value in vars(protocol).items()
        if (inspect.isfunction(value) or isinstance(value, property)) and name not in ignored
    }


def mismatches(wanted: Callable[..., object], given: Callable[..., object], owner: type) -> list[str]:
    """How ``given`` (an engine's method) differs from ``wanted`` (the contract's); empty when compatible.

    The contract's parameters must all be there, in order, of the same kind, default and type; the
    engine may add parameters of its own only if they are optional. ``Self`` in the contract is met by
    ``Self``, the engine's class or a type variable bound to one of its bases.
    """
    found: list[str] = []
    if inspect.iscoroutinefunction(wanted) != inspect.iscoroutinefunction(given):
        found.append("a coroutine on one side only (a queued write must stay queued at the call)")
    want_sig, give_sig = inspect.signature(wanted), inspect.signature(given)
    want_hints, give_hints = typing.get_type_hints(wanted), typing.get_type_hints(given)
    want_params = list(want_sig.parameters.values())[1:]
    give_params = list(give_sig.parameters.values())[1:]
    for index, want in enumerate(want_params):
        give = give_params[index] if index < len(give_params) else None
        if give is None or give.name != want.name:
            found.append(f"parameter {index + 1} is {give and give.name!r}, the contract says {want.name!r}")
            continue
        if give.kind != want.kind:
            found.append(f"{want.name}: {give.kind.description}, the contract says {want.kind.description}")
        if give.default != want.default:
            found.append(f"{want.name}: default {give.default!r}, the contract says {want.default!r}")
        if give_hints.get(want.name) != want_hints.get(want.name):
            found.append(f"{want.name}: {give_hints.get(want.name)}, the contract says {want_hints.get(want.name)}")
    for extra in give_params[len(want_params) :]:
        if extra.default is inspect.Parameter.empty and extra.kind not in (extra.VAR_POSITIONAL, extra.VAR_KEYWORD):
            found.append(f"{extra.name}: required here, unknown to the contract")
    want_return, give_return = want_hints.get("return"), give_hints.get("return")
    if want_return is typing.Self:
        if give_return is typing.Self:
            return found
        bound = getattr(give_return, "__bound__", give_return)
        bound_name = bound.__forward_arg__ if isinstance(bound, typing.ForwardRef) else getattr(bound, "__name__", "")
        if bound_name not in {cls.__name__ for cls in owner.__mro__}:
            found.append(f"returns {give_return}, the contract says the store itself")
    elif give_return != want_return:
        found.append(f"returns {give_return}, the contract says {want_return}")
    return found


INSTANCE_ATTRIBUTES = frozenset({"pairing"})
"""Members ``Store`` sets on each instance (``StoreLifecycle.__init__``): checked on an open store."""


def conformance(protocol: type, engine: type) -> dict[str, list[str]]:
    """Every member of ``protocol`` that ``engine`` lacks or declares differently, with how."""
    report: dict[str, list[str]] = {}
    for name, wanted in members(protocol).items():
        if name in INSTANCE_ATTRIBUTES:
            continue
        given = inspect.getattr_static(engine, name, None)
        if isinstance(wanted, property):
            if not isinstance(given, property):
                report[name] = [f"not a property of {engine.__name__}"]
            elif typing.get_type_hints(given.fget).get("return") != typing.get_type_hints(wanted.fget).get("return"):
                report[name] = ["another type"]
            continue
        if isinstance(given, classmethod | staticmethod) or not inspect.isfunction(given):
            report[name] = [f"not a method of {engine.__name__}"]
            continue
        if problems := mismatches(wanted, given, engine):
            report[name] = problems
    return report


def test_the_contract_covers_every_area_and_documents_each_member() -> None:
    declared = members(StorageEngine)
    assert len(declared) >= 40  # a member lost by an edit shows up here and in the architecture test
    undocumented = [name for name, member in declared.items() if not inspect.getdoc(member)]
    assert undocumented == []
    assert [name for name, member in members(PairingStorage).items() if not inspect.getdoc(member)] == []


def test_the_sqlite_store_declares_every_member_as_the_contract_does() -> None:
    assert conformance(StorageEngine, Store) == {}


def test_the_postgresql_store_declares_every_member_as_the_contract_does() -> None:
    assert conformance(StorageEngine, PostgresStore) == {}


def test_the_sqlite_pairing_state_declares_every_member_as_the_contract_does() -> None:
    assert conformance(PairingStorage, PairingStore) == {}


def test_the_sqlite_backup_functions_are_the_backup_hooks() -> None:
    module = type("SqliteBackup", (), {name: staticmethod(getattr(storage, name)) for name in members(BackupHooks)})
    report = {}
    for name, wanted in members(BackupHooks).items():
        given = getattr(module, name)

        def as_method(self: object, *args: object, _given: Callable[..., object] = given, **kwargs: object) -> object:
            return _given(*args, **kwargs)

        # compare the function against the contract's method with ``self`` dropped on both sides
        as_method.__signature__ = inspect.signature(given).replace(  # type: ignore[attr-defined]
            parameters=[inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
                        *inspect.signature(given).parameters.values()])  # fmt: skip
        as_method.__annotations__ = typing.get_type_hints(given)
        if problems := mismatches(wanted, as_method, module):
            report[name] = problems
    assert report == {}


async def test_an_open_store_is_a_storage_engine_with_its_pairing_state(tmp_path: Path) -> None:
    async with await Store.open(tmp_path / "state.db") as store:
        assert isinstance(store, StorageEngine)
        assert isinstance(store.pairing, PairingStorage)
        assert conformance(PairingStorage, type(store.pairing)) == {}


@pytest.mark.parametrize("mutate", ["rename", "coroutine", "default"])
def test_the_comparison_sees_a_drifted_signature(mutate: str) -> None:
    """The check can fail: a copy of ``Store`` with one member changed is reported."""

    class Drifted(Store):
        pass

    if mutate == "rename":

        async def end_session(self: Store, session_id: str, why: str) -> bool:
            raise NotImplementedError

        Drifted.end_session = end_session  # type: ignore[method-assign]
    elif mutate == "coroutine":

        async def inbox_mark_done(self: Store, platform: str, event_id: str) -> bool:
            raise NotImplementedError

        Drifted.inbox_mark_done = inbox_mark_done  # type: ignore[method-assign,assignment]
    else:

        async def list_sessions(
            self: Store, platform: str | None = None, limit: int = 10
        ) -> list[storage.SessionRecord]:
            raise NotImplementedError

        Drifted.list_sessions = list_sessions  # type: ignore[method-assign]
    assert len(conformance(StorageEngine, Drifted)) == 1
