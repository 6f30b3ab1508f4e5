"""A throwaway PostgreSQL server for tests and benchmarks: a fresh cluster in a temporary directory.

``PostgresServer`` runs the machine's own PostgreSQL binaries (Debian's postgresql-15 in
``/usr/lib/postgresql/15/bin``, else ``pg_config --bindir``, else ``initdb`` on the PATH): ``initdb``
with trust authentication for local connections, then ``pg_ctl start`` on a free 127.0.0.1 port with its
unix socket in the temporary directory, then ``createdb``. ``dsn`` is the URL to connect with;
``stop()`` shuts the server down (fast mode) and removes the directory; ``pause()`` and ``resume()`` stop
and start it again on the same port, keeping its data (a server that goes away for a while).

Durability is switched off (``fsync``, ``synchronous_commit``, ``full_page_writes``): the cluster lives
for one test session and is thrown away, so a crash of the machine loses nothing anyone wanted.

``initdb`` and ``postgres`` refuse to run as root. Run as root (as in CI containers), the server runs
as the ``postgres`` system user (``nobody`` where that does not exist), and owns its directory.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Final

DEBIAN_BINDIR: Final = Path("/usr/lib/postgresql/15/bin")
SUPERUSER: Final = "switchboard"
DATABASE: Final = "switchboard"
UNPRIVILEGED_USERS: Final = ("postgres", "nobody")
SETTINGS: Final = {
    "listen_addresses": "127.0.0.1",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "300",  # benchmarks open a pool of each driver at 100 concurrent writers
}


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server binaries on this machine; the message says where they were looked for."""


def find_bindir() -> Path:
    """The directory holding ``initdb``, ``pg_ctl`` and ``postgres``, or PostgresUnavailable naming where it looked."""
    candidates = [DEBIAN_BINDIR]
    pg_config = shutil.which("pg_config")
    if pg_config:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=True, timeout=10)
            candidates.append(Path(out.stdout.strip()))
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(Path(initdb).parent)
    for bindir in candidates:
        if all((bindir / tool).is_file() for tool in ("initdb", "pg_ctl", "postgres")):
            return bindir
    looked = ", ".join(dict.fromkeys(str(bindir) for bindir in candidates))
    raise PostgresUnavailable(
        f"no PostgreSQL server binaries (initdb, pg_ctl, postgres) in {looked}"
        f"{'' if pg_config else ' (no pg_config)'}{'' if initdb else ' nor initdb on the PATH'};"
        " install postgresql-15 (Debian: apt-get install postgresql-15)"
    )


def free_port() -> int:
    """A loopback TCP port nobody listened on a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _server_user() -> pwd.struct_passwd | None:
    """The unprivileged account to run the server as, or None when this process is not root."""
    if os.geteuid() != 0:
        return None
    for name in UNPRIVILEGED_USERS:
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise PostgresUnavailable(
        f"running as root, and none of the users {', '.join(UNPRIVILEGED_USERS)} exists to run PostgreSQL as"
    )


class PostgresServer:
    """One PostgreSQL cluster in its own temporary directory, for as long as a test session or benchmark runs."""

    def __init__(self, *, database: str = DATABASE, parent: Path | None = None) -> None:
        self.bindir = find_bindir()
        self.database = database
        self._parent = parent
        self._account = _server_user()
        self.base: Path | None = None
        self.port = 0

    @property
    def dsn(self) -> str:
        """The URL of the server's database."""
        return self.dsn_for(self.database)

    def dsn_for(self, database: str) -> str:
        """The URL of another database on the same server."""
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    @property
    def socket_dir(self) -> Path:
        assert self.base is not None, "the server is not started"
        return self.base / "socket"

    @property
    def log_path(self) -> Path:
        assert self.base is not None, "the server is not started"
        return self.base / "server.log"

    def start(self) -> PostgresServer:
        """Create the cluster, start the server and create the database; return self."""
        # Not under pytest's tmp_path: its parents are private to root, and the server may run as another user.
        self.base = Path(tempfile.mkdtemp(prefix="switchboard-pg-", dir=self._parent))
        atexit.register(self.stop)  # an interrupted session leaves no server running
        self.socket_dir.mkdir()
        if self._account is not None:
            for path in (self.base, self.socket_dir):
                os.chown(path, self._account.pw_uid, self._account.pw_gid)
        self._as_server(
            "initdb", "--pgdata", str(self.base / "data"), "--username", SUPERUSER, "--auth", "trust",
            "--encoding", "UTF8", "--locale", "C.UTF-8", "--no-sync",
        )  # fmt: skip
        for attempt in range(3):  # another process may take the free port between our probe and the server's bind
            self.port = free_port()
            if self._pg_ctl_start(check=attempt == 2).returncode == 0:
                break
        self._client("createdb", self.database)
        return self

    def pause(self) -> None:
        """Stop the server (fast: open sessions are ended) but keep its cluster: the server has gone away."""
        assert self.base is not None, "the server is not started"
        self._as_server("pg_ctl", "stop", "--pgdata", str(self.base / "data"), "--mode", "fast", "--wait")

    def resume(self) -> None:
        """Start the server again after ``pause()``, on the same port, with everything it held."""
        self._pg_ctl_start(check=True)

    def _pg_ctl_start(self, *, check: bool) -> subprocess.CompletedProcess[str]:
        assert self.base is not None, "the server is not started"
        options = " ".join(f"-c {key}={value}" for key, value in SETTINGS.items())
        return self._as_server(
            "pg_ctl", "start", "--pgdata", str(self.base / "data"), "--log", str(self.log_path), "--wait",
            "--timeout", "60", "-o", f"-p {self.port} -k {self.socket_dir} {options}", check=check,
        )  # fmt: skip

    def create_database(self, name: str) -> str:
        """A new empty database on this server; its URL."""
        self._client("createdb", name)
        return self.dsn_for(name)

    def drop_database(self, name: str) -> None:
        self._client("dropdb", "--force", "--if-exists", name)

    def stop(self) -> None:
        """Shut the server down (fast: open sessions are ended) and remove its directory. Safe to call twice."""
        if self.base is None:
            return
        base, self.base = self.base, None
        if (base / "data" / "postmaster.pid").exists():
            self._run("pg_ctl", "stop", "--pgdata", str(base / "data"), "--mode", "fast", "--wait",
                      as_server=True, check=False, cwd=base)  # fmt: skip
        shutil.rmtree(base, ignore_errors=True)
        atexit.unregister(self.stop)

    def _as_server(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self._run(tool, *args, as_server=True, check=check, cwd=self.base)

    def _client(self, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
        return self._run(tool, "--host", "127.0.0.1", "--port", str(self.port), "--username", SUPERUSER, *args,
                         as_server=False, check=True, cwd=None)  # fmt: skip

    def _run(
        self, tool: str, *args: str, as_server: bool, check: bool, cwd: Path | None
    ) -> subprocess.CompletedProcess[str]:
        account = self._account if as_server else None
        env = {**os.environ, "LC_ALL": "C.UTF-8", "PGTZ": "UTC"}
        if account is not None:
            env.update(HOME=account.pw_dir, USER=account.pw_name, LOGNAME=account.pw_name)
        done = subprocess.run(
            [str(self.bindir / tool), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120,
            user=account.pw_uid if account else None, group=account.pw_gid if account else None,
            extra_groups=[] if account else None,
        )  # fmt: skip
        if check and done.returncode != 0:
            log = ""
            with contextlib.suppress(OSError, AssertionError):
                log = self.log_path.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{tool} {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}\n{log}")
        return done
