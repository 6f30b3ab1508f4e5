"""The sites an adapter downloads users' files from: the only ones a file's URL may point at.

A platform's event names the URL of a file a user sent (Discord's CDN address, Slack's
``url_private_download``). The adapter fetches it only when it is on one of the platform's own
file hosts or on the site of the API base the operator configured (a self-hosted API server, or
the local emulator in tests). Anything else, from a tampered event or a platform change, is refused
before a request is made: no download from, and no token sent to, a site nobody chose.

A site is scheme, host and port (``https://cdn.discordapp.com`` is port 443): the same host on
another port, or over plain HTTP, is another site.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

_DEFAULT_PORTS: Final = {"http": 80, "https": 443}

Site = tuple[str, str, int]
"""(scheme, host, port), lower-case."""


def site_of(url: str) -> Site | None:
    """The site ``url`` is on; None for a URL that names none (no host, not HTTP(S), a bad port)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if scheme not in _DEFAULT_PORTS or not host:
        return None
    return scheme, host, port or _DEFAULT_PORTS[scheme]


@dataclass(frozen=True, slots=True)
class FileHosts:
    sites: frozenset[Site]

    @classmethod
    def of(cls, platform_hosts: Iterable[str], configured_base: str | None = None) -> FileHosts:
        """The platform's own file hosts (``https://...`` URLs) plus the site of the configured API base."""
        found = {site_of(url) for url in (*platform_hosts, *([configured_base] if configured_base else []))}
        return cls(frozenset(site for site in found if site is not None))

    def allows(self, url: str) -> bool:
        return site_of(url) in self.sites

    def describe(self) -> str:
        """The allowed sites, for a message: ``cdn.discordapp.com, 127.0.0.1:8080``."""
        return ", ".join(sorted(_shown(site) for site in self.sites))


def host_of(url: str) -> str:
    """The host (and a port other than the scheme's own) of ``url``, for a message; the URL's path and query
    (which may hold a signature) are never shown."""
    site = site_of(url)
    return "an address that names no web site" if site is None else _shown(site)


def _shown(site: Site) -> str:
    scheme, host, port = site
    return host if port == _DEFAULT_PORTS[scheme] else f"{host}:{port}"
