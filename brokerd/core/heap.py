"""Keep the cyclic garbage collector's full passes off the latency path.

A full (generation 2) collection walks every tracked object in the process. After
start-up that is mostly what start-up made and never frees: imported modules, the
Twisted and metrics machinery, the opened log directory. On this broker a full pass
during traffic took ~90 ms (docs/performance.md, "End-to-end latency"), stalling every
produce and fetch behind it. :func:`settle_heap` runs once, when the broker starts
serving: it collects what start-up left over and moves the survivors to the
collector's permanent generation (``gc.freeze``), so later full passes walk only what
was allocated since. What it does not do: disable collection or change its thresholds;
objects that die later are collected as before.
"""

from __future__ import annotations

import gc
import threading

_lock = threading.Lock()
_settled = False


def settle_heap() -> bool:
    """Collect, then freeze the survivors; once per process (later calls do nothing, so
    a process that starts several brokers, as the tests do, freezes only the first
    start-up's heap). Returns whether this call did it."""
    global _settled
    with _lock:
        if _settled:
            return False
        _settled = True
    gc.collect()
    gc.freeze()
    return True
