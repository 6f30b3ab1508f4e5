"""The installed version of Switchboard."""

from __future__ import annotations

from importlib import metadata


def version() -> str:
    try:
        return metadata.version("switchboard")
    except metadata.PackageNotFoundError:
        return "0+unknown"
