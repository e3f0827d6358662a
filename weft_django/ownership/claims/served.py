"""What an engine serves: workflow names, and the versions of each it has.

The claim queries take ``names``, a collection of workflow names. A
:class:`Served` is such a collection (a ``frozenset`` of names) that also
knows which versions of each name the process has registered: given one, the
intake's window reads only runs whose ``(workflow_name, workflow_version)``
pair is served, and a takeover moves only such runs, so during a rolling
deploy each run goes to an engine that can replay it. A plain collection of
names means "any version" (the engine still refuses a run whose version it
does not have, at its turn).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any


class Served(frozenset[str]):
    """Workflow names (the set's members) with the versions served of each."""

    versions: Mapping[str, frozenset[int]]
    #: The flow-control queues served (None: every queue), ``weft_worker --queue``.
    queues: frozenset[str] | None

    def __new__(
        cls, pairs: Iterable[tuple[str, int]], *, queues: Iterable[str] | None = None
    ) -> Served:
        versions: dict[str, set[int]] = {}
        for name, version in pairs:
            versions.setdefault(name, set()).add(int(version))
        served = super().__new__(cls, versions)
        served.versions = {name: frozenset(found) for name, found in versions.items()}
        served.queues = frozenset(queues) if queues is not None else None
        return served

    @classmethod
    def of(
        cls, versions: Mapping[str, Iterable[int]], *, queues: Iterable[str] | None = None
    ) -> Served:
        """From ``name -> versions`` (as ``registry.registered_versions()`` gives)."""
        pairs = ((name, version) for name, found in versions.items() for version in found)
        return cls(pairs, queues=queues)

    def pairs(self) -> list[tuple[str, int]]:
        """The (name, version) pairs served, sorted."""
        return sorted((name, v) for name, found in self.versions.items() for v in found)

    def as_json(self) -> dict[str, list[int]]:
        """``name -> [versions]``: what an engine row records (``Engine.workflows``)."""
        return {name: sorted(found) for name, found in sorted(self.versions.items())}


def admits(names: Collection[str], name: str, version: int | None) -> bool:
    """Whether a run of ``name`` at ``version`` is one ``names`` serves (any
    version of a listed name when ``names`` is not a :class:`Served`)."""
    if name not in names:
        return False
    if not isinstance(names, Served) or version is None:
        return True
    return version in names.versions.get(name, frozenset())


def served_sql(
    connection: Any,
    name_column: str,
    version_column: str,
    names: Collection[str],
    queue_column: str | None = None,
) -> tuple[str, list[Any]]:
    """A WHERE condition (and its parameters) for runs of ``names``: per name,
    its versions when ``names`` is a :class:`Served` (one clause per set of
    versions). ``name_column`` is put as
    given (the intake passes it wrapped so no index on it is used)."""
    ordered = sorted(names)
    if not isinstance(names, Served):
        return f"{name_column} IN ({', '.join(['%s'] * len(ordered))})", list(ordered)
    sql, params = _versions_sql(name_column, version_column, names)
    if queue_column is not None and names.queues is not None:
        queues = sorted(names.queues)
        sql = f"{sql} AND {queue_column} IN ({', '.join(['%s'] * len(queues))})"
        params += queues
    return sql, params


def _versions_sql(name_column: str, version_column: str, names: Served) -> tuple[str, list[Any]]:
    ordered = sorted(names)
    # Names that have the same versions share one clause: with every name at
    # version 1 (the common case) the condition is ``name IN (...) AND version IN (1)``.
    groups: dict[tuple[int, ...], list[str]] = {}
    for name in ordered:
        groups.setdefault(tuple(sorted(names.versions[name])), []).append(name)
    parts, params = [], []
    for versions, group in sorted(groups.items()):
        in_names = ", ".join(["%s"] * len(group))
        in_versions = ", ".join(["%s"] * len(versions))
        parts.append(f"({name_column} IN ({in_names}) AND {version_column} IN ({in_versions}))")
        params += [*group, *versions]
    return f"({' OR '.join(parts)})", params
