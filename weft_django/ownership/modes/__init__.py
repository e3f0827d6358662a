"""The ownership strategies, one class per mode, and the factory that picks one.

``ownership_for(engine_id, settings)`` is called once, when an engine is
built; everything mode-specific after that is a method call on what it
returns (see :class:`~weft_django.ownership.modes.base.Ownership`).
"""

from __future__ import annotations

from ...conf import WeftSettings
from ...exceptions import WeftConfigurationError
from ..clock import Clock
from .base import Ownership
from .lease import GlobalLeaseOwnership
from .none import NoOwnership
from .workflow_lease import WorkflowLeaseOwnership

STRATEGIES: dict[str, type[Ownership]] = {
    cls.name: cls for cls in (WorkflowLeaseOwnership, GlobalLeaseOwnership, NoOwnership)
}


def ownership_class(mode: str) -> type[Ownership]:
    """The strategy class of ownership mode ``mode``."""
    try:
        return STRATEGIES[mode]
    except KeyError:
        raise WeftConfigurationError(
            f"{mode!r} is not an ownership mode; use one of {', '.join(map(repr, STRATEGIES))}."
        ) from None


def ownership_for(
    engine_id: str,
    settings: WeftSettings,
    *,
    using: str | None = None,
    clock: Clock | None = None,
) -> Ownership:
    """The ownership strategy of ``settings.ownership`` for engine ``engine_id``."""
    return ownership_class(settings.ownership)(engine_id, settings, using=using, clock=clock)


__all__ = [
    "STRATEGIES",
    "GlobalLeaseOwnership",
    "NoOwnership",
    "Ownership",
    "WorkflowLeaseOwnership",
    "ownership_class",
    "ownership_for",
]
