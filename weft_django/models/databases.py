"""Which database weft's tables live on, and the MariaDB/MySQL collation they use."""

from __future__ import annotations

from typing import Any, cast

from django.db import router
from django.db.backends.base.base import BaseDatabaseWrapper

from .runs import WorkflowRun


def db_for(using: str | None = None) -> str:
    """The database alias weft works on: ``using`` when given, else the router's
    choice for writing runs (``"default"`` when no router says otherwise).

    Every weft table must live on that one database: a claim and the run it
    fences are written in one transaction.
    """
    return using if using is not None else router.db_for_write(WorkflowRun)


def mysql_collation(connection: BaseDatabaseWrapper) -> str:
    """The collation of weft's text columns on MySQL/MariaDB: binary and without
    padding, so ids and names compare exactly as on PostgreSQL and SQLite (the
    server defaults ignore case, accents and trailing spaces: "Order-1",
    "order-1" and "order-1 " would be one workflow id there)."""
    return "utf8mb4_nopad_bin" if is_mariadb(connection) else "utf8mb4_0900_bin"


def is_mariadb(connection: BaseDatabaseWrapper) -> bool:
    """MySQL's DatabaseWrapper knows its server (the stubs type only the base class)."""
    return bool(cast(Any, connection).mysql_is_mariadb)
