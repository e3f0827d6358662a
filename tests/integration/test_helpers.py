"""The integration helpers' own checks that need no worker process."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.integration.helpers import sqlite_write_locked


def test_the_sqlite_write_lock_probe_sees_a_held_lock_and_its_release(tmp_path: Path) -> None:
    path = str(tmp_path / "probe.sqlite3")
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("PRAGMA journal_mode=WAL")
        holder.execute("CREATE TABLE t (x INTEGER)")
        assert not sqlite_write_locked(path)
        holder.execute("BEGIN IMMEDIATE")
        holder.execute("INSERT INTO t VALUES (1)")
        assert sqlite_write_locked(path)
        holder.execute("COMMIT")
        assert not sqlite_write_locked(path)
        # The probe itself wrote nothing and left no lock behind.
        assert holder.execute("SELECT count(*) FROM t").fetchone() == (1,)
    finally:
        holder.close()
