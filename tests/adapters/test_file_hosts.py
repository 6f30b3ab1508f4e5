"""Which URLs an adapter downloads users' files from: the platform's hosts and the configured API base's site."""

from __future__ import annotations

from adapters.file_hosts import FileHosts, host_of

DISCORD = FileHosts.of(("https://cdn.discordapp.com", "https://media.discordapp.net"), "http://127.0.0.1:8080/api/v10")


def test_the_platforms_hosts_and_the_configured_site_are_allowed() -> None:
    assert DISCORD.allows("https://cdn.discordapp.com/attachments/1/2/cat.png?ex=1&is=2&hm=3")
    assert DISCORD.allows("https://CDN.discordapp.com:443/attachments/1/2/cat.png")
    assert DISCORD.allows("https://media.discordapp.net/attachments/1/2/cat.png?width=100")
    assert DISCORD.allows("http://127.0.0.1:8080/attachments/1/2/cat.png")


def test_another_scheme_port_or_host_is_another_site() -> None:
    assert not DISCORD.allows("http://cdn.discordapp.com/attachments/1/2/cat.png")
    assert not DISCORD.allows("https://cdn.discordapp.com:8443/attachments/1/2/cat.png")
    assert not DISCORD.allows("https://cdn.discordapp.com.example.net/attachments/1/2/cat.png")
    assert not DISCORD.allows("https://evil.example/?https://cdn.discordapp.com/")
    assert not DISCORD.allows("http://127.0.0.1:9090/attachments/1/2/cat.png")
    assert not DISCORD.allows("https://user@127.0.0.2:8080/x")


def test_urls_that_name_no_site_are_refused() -> None:
    for url in ("", "/attachments/1/2/cat.png", "file:///etc/passwd", "ftp://cdn.discordapp.com/x",
                "https://cdn.discordapp.com:99999/x", "https://[::1/x"):  # fmt: skip
        assert not DISCORD.allows(url), url


def test_messages_name_the_host_never_the_path() -> None:
    assert host_of("https://cdn.discordapp.com/attachments/1/2/secret.png?hm=signature") == "cdn.discordapp.com"
    assert host_of("http://127.0.0.2:5000/x") == "127.0.0.2:5000"
    assert DISCORD.describe() == "127.0.0.1:8080, cdn.discordapp.com, media.discordapp.net"
    assert FileHosts.of(()).describe() == ""
