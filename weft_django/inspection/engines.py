"""Engines and the claims they hold, counted so that the cost does not grow
with the number of parked runs: the admin overview and ``manage.py weft
engines``."""

from __future__ import annotations

from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Count, OuterRef, Subquery
from django.db.models.expressions import RawSQL
from django.db.models.functions import Coalesce

from ..models import Claim, Engine

#: Claims counted per engine on the overview before it says "10,000+".
CLAIMS_COUNT_CAP = 10_000


def claims_held(connection: BaseDatabaseWrapper) -> models.Expression:
    """Claims held per engine, counted up to :data:`CLAIMS_COUNT_CAP` + 1 (a
    correlated ``LIMIT`` subquery) so the overview's cost does not grow with the
    number of parked runs. MariaDB allows no outer reference inside a derived
    table: there the count is exact."""
    if connection.vendor == "mysql":
        return Coalesce(
            Subquery(
                Claim.objects.filter(holder=OuterRef("pk"))
                .order_by()
                .values("holder")
                .annotate(n=Count("*"))
                .values("n")
            ),
            0,
        )
    qn = connection.ops.quote_name
    claim, engine = Claim._meta.db_table, Engine._meta.db_table
    return RawSQL(
        f"(SELECT COUNT(*) FROM (SELECT 1 FROM {qn(claim)} c WHERE c.{qn('holder_id')} = "
        f"{qn(engine)}.{qn('id')} LIMIT %s) held)",
        (CLAIMS_COUNT_CAP + 1,),
        output_field=models.IntegerField(),
    )


__all__ = ["CLAIMS_COUNT_CAP", "claims_held"]
