"""The extras of setup.cfg (docs/getting-started.md, "Extras"): each brings what
its feature imports, so that a fresh install of ``weft-django[<extra>]`` runs it."""

from __future__ import annotations

import configparser
from pathlib import Path

from packaging.requirements import Requirement

SETUP_CFG = Path(__file__).resolve().parent.parent / "setup.cfg"


def extra(name: str) -> dict[str, Requirement]:
    parser = configparser.ConfigParser()
    parser.read(SETUP_CFG)
    lines = parser["options.extras_require"][name].strip().splitlines()
    return {req.name: req for req in map(Requirement, filter(None, map(str.strip, lines)))}


def test_the_celery_extra_brings_kombus_redis_transport() -> None:
    """kombu's redis transport imports redis and packaging: celery[redis] brings both
    (celery and redis alone did not: `celery -A proj worker` failed on packaging)."""
    celery = extra("celery")["celery"]
    assert "redis" in celery.extras
    assert celery.specifier.contains("5.3")


def test_the_example_extra_runs_the_example_project_and_its_celery_app() -> None:
    """bin/demo runs the example project (django-environ) with its Celery app."""
    example = extra("example")
    assert "django-environ" in example
    assert "redis" in example["celery"].extras
