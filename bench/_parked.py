"""Many parked runs, fast: clone one really parked run of ``orders.cart`` in SQL.

Parking 100,000 runs through workers' turns takes minutes (that is the intake
benchmark's subject, not these). The takeover and memory benchmarks only
need a worker *holding* that many parked runs, so they let a worker park one
``orders.cart`` run for real (a cart waits for its ``checkout`` signal), then
copy its run row and events under new ids with ``generate_series``
(PostgreSQL), leaving the copies' claims without a holder and stamped
``released_at``, exactly as a graceful shutdown leaves them. A worker's
reclaim scan then takes and holds them, as it would after that shutdown.
The copies are parked runs like any other: a ``checkout`` signal completes
them.
"""

from __future__ import annotations

import time
from typing import Any


def park_template(weft: Any, customer: str = "template") -> str:
    """Start one cart and wait until a worker has parked it; its id."""
    from weft_django.models import RunStatus, WorkflowRun

    run_id = weft.start("orders.cart", customer).id
    deadline = time.monotonic() + 60
    while not WorkflowRun.objects.filter(pk=run_id, status=RunStatus.WAITING).exists():
        if time.monotonic() > deadline:
            raise SystemExit("the template cart never parked")
        time.sleep(0.05)
    return run_id


def clone_parked(template: str, prefix: str, first: int, count: int) -> float:
    """Copies ``first`` .. ``first + count - 1`` of ``template`` (ids
    ``<prefix>-<n>``), their claims without a holder at epoch 1, released; seconds taken."""
    from django.db import connection, transaction

    from weft_django.models import Claim, WorkflowEvent, WorkflowRun

    quote = connection.ops.quote_name
    new_id = "%s || '-' || lpad(g::text, 7, '0')"

    def copy(model: Any, key: str) -> str:
        columns = [f.column for f in model._meta.concrete_fields if f.column != "id" or key == "id"]
        values = [new_id if c == key else quote(c) for c in columns]
        return (
            f"INSERT INTO {quote(model._meta.db_table)} ({', '.join(map(quote, columns))}) "
            f"SELECT {', '.join(values)} FROM {quote(model._meta.db_table)} t, "
            f"generate_series(%s, %s) g WHERE t.{quote(key)} = %s"
        )

    began = time.monotonic()
    last = first + count - 1
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(copy(WorkflowRun, "id"), [prefix, first, last, template])
        cursor.execute(copy(WorkflowEvent, "run_id"), [prefix, first, last, template])
        cursor.execute(
            f"INSERT INTO {quote(Claim._meta.db_table)} "
            "(workflow_id, epoch, holder_id, claimed_at, released_at) "
            f"SELECT {new_id}, 1, NULL, NULL, clock_timestamp() FROM generate_series(%s, %s) g",
            [prefix, first, last],
        )
    return time.monotonic() - began


def held_by(engine_id: str) -> int:
    from weft_django.models import Claim

    return Claim.objects.filter(holder_id=engine_id).count()


def rss_kb(pid: int) -> int:
    """VmRSS of process ``pid`` in kB (Linux /proc)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise SystemExit(f"no VmRSS for pid {pid}")
