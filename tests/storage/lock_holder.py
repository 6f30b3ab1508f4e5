"""Hold the database's write lock for a while, from another process.

    python tests/storage/lock_holder.py DB SECONDS

Prints "locked" once it holds the lock, "released" after committing.
"""

import sqlite3
import sys
import time


def main(path: str, seconds: float) -> None:
    conn = sqlite3.connect(path, isolation_level=None, timeout=10)
    conn.execute("BEGIN IMMEDIATE")
    print("locked", flush=True)
    time.sleep(seconds)
    conn.execute("COMMIT")
    conn.close()
    print("released", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]))
