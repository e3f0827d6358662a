"""Model choices: the engine kind has one word, its value, wherever it is shown."""

from __future__ import annotations

import re
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.urls import reverse

from tests.factories import EngineFactory
from weft_django.models import Engine, EngineKind

ROOT = Path(__file__).resolve().parent.parent


def test_every_engine_kind_label_is_its_value() -> None:
    assert [(kind.value, str(kind.label)) for kind in EngineKind] == [
        ("worker", "worker"),
        ("celery", "celery"),
        ("test", "test"),
        ("other", "other"),
    ]
    assert Engine._meta.get_field("kind").choices == [
        ("worker", "worker"),
        ("celery", "celery"),
        ("test", "test"),
        ("other", "other"),
    ]


@pytest.fixture
def fast_password_hashing(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.mark.django_db
def test_the_admin_and_weft_marker_show_the_same_word(
    admin_client: Any, fast_password_hashing: None
) -> None:
    worker = EngineFactory(kind=EngineKind.WORKER)
    EngineFactory(kind=EngineKind.CELERY)
    overview = admin_client.get("/admin/weft_django/overview/").content.decode()
    assert "<td>worker</td>" in overview  # the Celery passes have their own section
    engines = admin_client.get(reverse("admin:weft_django_engine_changelist")).content.decode()
    assert re.search(r'href="\?kind__exact=worker">worker<', engines)
    assert re.search(r'href="\?kind__exact=celery">celery<', engines)
    assert "weft_worker" not in engines and "celery task" not in engines

    out = StringIO()
    call_command("weft_marker", stdout=out)
    assert f"{worker.id}  host={worker.hostname} pid={worker.pid} kind=worker " in out.getvalue()


def test_the_docs_use_the_kind_values_as_kind_names() -> None:
    """Where a page lists an engine's kinds, ``kind (...)``, it names the values."""
    for page in sorted((ROOT / "docs").glob("*.md")):
        engine_lines = [ln for ln in page.read_text().splitlines() if "engine" in ln.lower()]
        for kind_list in re.findall(r"\bkind \(([^)]*)\)", "\n".join(engine_lines)):
            words = re.findall(r"`([a-z_]+)`", kind_list)
            kinds = [word for word in words if word in {"worker", "celery", "test", "other"}]
            assert kinds, (page.name, kind_list)
            assert "Celery task," not in kind_list and "test driver)" not in kind_list, page.name
