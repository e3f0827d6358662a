"""The worker's Prometheus metrics over HTTP (``manage.py weft_worker
--metrics-port``), bound to this machine only unless told otherwise."""

from __future__ import annotations

import ipaddress
import logging
from typing import Any

from prometheus_client import start_http_server

from ..exceptions import MetricsServerError, WeftConfigurationError
from ..ownership import metrics

logger = logging.getLogger("weft_django.worker")

#: The address the metrics server binds to unless told otherwise: this machine
#: only (``--metrics-addr 0.0.0.0`` for a scraper on another host).
DEFAULT_METRICS_ADDR = "127.0.0.1"


def metrics_address(addr: str) -> str:
    """``addr`` if it is an IPv4 or IPv6 address to bind the metrics server to;
    else a :class:`~weft_django.exceptions.WeftConfigurationError`."""
    try:
        return str(ipaddress.ip_address(addr.strip().strip("[]")))
    except (ValueError, AttributeError):
        raise WeftConfigurationError(
            f"The metrics address {addr!r} is not an IP address: give one of this "
            "machine's addresses, e.g. 127.0.0.1 (the default), 0.0.0.0 (every IPv4 "
            "interface) or :: (every interface)."
        ) from None


def serve_metrics(addr: str, port: int) -> Any:
    """Serve weft's metrics registry at ``http://addr:port/metrics`` from a daemon
    thread; returns the HTTP server (its ``server_address`` is the bound one).
    A port that is taken or an address that is not this machine's is a
    :class:`~weft_django.exceptions.MetricsServerError`."""
    try:
        server, _thread = start_http_server(port, addr=addr, registry=metrics.REGISTRY)
    except OSError as exc:
        raise MetricsServerError(
            exc.errno, f"cannot serve metrics on {addr} port {port}: {exc}"
        ) from exc
    host = f"[{addr}]" if ":" in addr else addr
    logger.info("metrics on http://%s:%d/metrics", host, port)
    return server
