"""Hold the database's write lock for a while, from another process.

    python tests/storage/lock_holder.py DB SECONDS
    python tests/storage/lock_holder.py DB -        (until a line arrives on stdin, or it closes)

Prints "locked" once it holds the lock, "released" after committing.
"""

import sqlite3
import sys
import time


def main(path: str, seconds: str) -> None:
    conn = sqlite3.connect(path, isolation_level=None, timeout=10)
    conn.execute("BEGIN EXCLUSIVE")  # in WAL mode: no other writer; readers go on
    print("locked", flush=True)
    if seconds == "-":
        sys.stdin.readline()
    else:
        time.sleep(float(seconds))
    conn.execute("COMMIT")
    conn.close()
    print("released", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
