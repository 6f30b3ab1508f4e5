"""The package's shape: a leaf that imports none of the project's other packages, with a curated API."""

from __future__ import annotations

import subprocess
import sys

import storage


def test_storage_imports_no_other_project_package() -> None:
    code = (
        "import sys, storage, storage.store, storage.search.fulltext;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'gateway', 'agent', 'adapters', 'config'}))"
    )
    result = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_public_names_are_listed_and_exist() -> None:
    assert storage.__all__ == sorted(storage.__all__)
    assert all(hasattr(storage, name) for name in storage.__all__)
    assert {"Store", "NewMessage", "MessageRecord", "SessionRecord", "StorageError", "WriteFailedError"} <= set(
        storage.__all__
    )
