"""The examples of docs/updates.md run as written: the ``shop.cart`` workflow at
the top of the page and the test under "Testing updates", which drives it with
``weft_django.testing.WorkflowDriver``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import weft_django as weft
from weft_django.models import UpdateRequest
from weft_django.runtime import registry

PAGE = Path(__file__).resolve().parent.parent.parent / "docs" / "updates.md"


def _blocks(text: str) -> list[str]:
    """The page's top-level python code blocks (not the indented ones in lists)."""
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)


def _section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


@pytest.fixture
def page() -> Iterator[dict[str, Any]]:
    """The namespace the page's code runs in, with ``shop.cart`` registered from it."""
    text = PAGE.read_text()
    namespace: dict[str, Any] = {"weft": weft, "Context": weft.Context}
    exec(compile(_blocks(text)[0], f"{PAGE}:cart", "exec"), namespace)
    exec(compile(_blocks(_section(text, "Testing updates"))[0], f"{PAGE}:test", "exec"), namespace)
    yield namespace
    registry.unregister("shop.cart")


def test_the_testing_updates_example_passes(db: None, page: dict[str, Any]) -> None:
    page["test_cart_counts_items"](None)
    assert list(UpdateRequest.objects.values_list("status", flat=True)) == ["applied"]
