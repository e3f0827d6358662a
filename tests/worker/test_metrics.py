"""The worker's metrics server: this machine only unless told otherwise."""

from __future__ import annotations

import socket
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from weft_django.exceptions import MetricsServerError, WeftConfigurationError
from weft_django.models import Engine
from weft_django.worker import Worker
from weft_django.worker.metrics import metrics_address

from ..workers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _outside_address() -> str | None:
    """An address of this machine other than loopback (None: it has none)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))  # no packet is sent
        except OSError:
            return None
        addr = str(probe.getsockname()[0])
    return None if addr.startswith("127.") or addr == "0.0.0.0" else addr


def _connects(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


@pytest.fixture
def serving(start_worker: Callable[..., Any]) -> Iterator[Callable[..., Any]]:
    """``serving(**worker_kwargs)``: a running worker's metrics server (closed after)."""
    servers: list[Any] = []

    def serve(**kwargs: Any) -> Any:
        worker = start_worker(**kwargs).worker
        server = wait_for(lambda: worker.metrics_server, 10, "the metrics server")
        servers.append(server)
        return server

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


def test_metrics_listen_on_loopback_only_by_default(serving: Callable[..., Any]) -> None:
    port = _free_port()
    server = serving(metrics_port=port)
    assert server.server_address[:2] == ("127.0.0.1", port)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        assert answer.status == 200
        assert b"weft_workflow_turns_total" in answer.read()
    outside = _outside_address()
    if outside is not None:
        assert not _connects(outside, port)


def test_the_metrics_address_is_honoured(serving: Callable[..., Any]) -> None:
    port = _free_port()
    server = serving(metrics_port=port, metrics_addr="0.0.0.0")
    assert server.server_address[:2] == ("0.0.0.0", port)
    outside = _outside_address()
    if outside is not None:
        assert _connects(outside, port)


@pytest.mark.parametrize("bad", ["", "localhost:9100", "not-an-address", "256.0.0.1"])
def test_a_bad_metrics_address_is_refused_before_anything_is_written(bad: str) -> None:
    with pytest.raises(WeftConfigurationError, match="not an IP address"):
        Worker(install_signal_handlers=False, metrics_port=_free_port(), metrics_addr=bad)
    assert not Engine.objects.exists()


def test_addresses_are_normalised() -> None:
    assert metrics_address("::") == "::"
    assert metrics_address("[::1]") == "::1"
    assert metrics_address(" 10.0.0.1 ") == "10.0.0.1"


def test_the_command_refuses_a_bad_metrics_address(fast: Callable[..., None]) -> None:
    with pytest.raises(CommandError, match="'nowhere' is not an IP address"):
        call_command("weft_worker", "--once", "--metrics-port", "9", "--metrics-addr", "nowhere")
    assert not Engine.objects.exists()


def test_a_taken_metrics_port_is_a_metrics_server_error(fast: Callable[..., None]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        worker = Worker(install_signal_handlers=False, metrics_port=busy.getsockname()[1])
        with pytest.raises(MetricsServerError, match=r"cannot serve metrics on 127\.0\.0\.1"):
            worker.run()
