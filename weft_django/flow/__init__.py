"""Flow control (docs/flow-control.md): queues with concurrency and rate
limits, concurrency keys and priorities, held across every worker.

- :mod:`.settings`: ``WEFT["QUEUES"]`` parsed and validated (``weft.E040``
  to ``weft.E045``), and the checks of ``start()``'s ``queue``, ``priority``
  and ``concurrency_key``;
- :mod:`.slots`: the numbered concurrency slots, taken and freed by
  conditional UPDATEs, tied to the claim epoch of the turn holding them;
- :mod:`.rate`: the rate limiters, one GCRA cell per queue (and key);
- :mod:`.gate`: a turn's admission: slots and rate taken in one transaction,
  or the run deferred durably to when it may try again;
- :mod:`.metrics` and :mod:`.overview`: what the admin and Prometheus show.
"""
