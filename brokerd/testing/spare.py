"""A broker process started before it is needed (the launcher runs :func:`main` through
``python -c``, as it runs twistd, so that ``sys.path`` is a cold start's).

A cold test broker spends almost all of its start importing (Twisted's reactor, twistd,
the broker's modules and the Kafka message classes). A spare pays that in advance: it
imports what a start imports, then waits for ONE line of JSON on its stdin::

    {"argv": [twistd's arguments], "cwd": "...", "env": {"NAME": "value"}, "unset": ["NAME"]}

On it, the spare changes directory and environment and runs twistd's ``run()`` with
that argv: the same broker, with the same log file, ready file, signal handling and
exit status, that ``python -c "from twisted.scripts.twistd import run; run()" ARGV``
runs, in the same process (its pid is the broker's). At end of file before a line (the
test session that started it has ended, or dropped it) it exits 0 at once, so a spare
never outlives its launcher.

Before its line a spare holds no port, no file of a data directory and no thread:
importing opens the reactor's own descriptors (its poller and waker pipe), nothing else.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def preload() -> None:
    """Import everything a test-mode ``twistd broker`` start imports."""
    from twisted.application.service import IServiceMaker
    from twisted.internet import reactor  # noqa: F401  (the default one, as twistd's)
    from twisted.plugin import getPlugins
    from twisted.scripts import twistd  # noqa: F401

    import brokerd.tap  # noqa: F401
    from brokerd.app.wiring import preload as preload_broker

    # twistd looks its subcommands up through the plugin system: importing the plugin
    # modules now leaves the start only the scan of the cache.
    list(getPlugins(IServiceMaker))
    preload_broker()


def read_order(stream: Any) -> dict[str, Any] | None:
    """The order line from ``stream`` (a binary file), None at end of file."""
    line = stream.readline()
    if not line:
        return None
    order = json.loads(line)
    if not isinstance(order, dict) or not isinstance(order.get("argv"), list):
        raise ValueError(f"a spare's order must be a JSON object with an argv list: {line!r}")
    return order


def become_broker(order: dict[str, Any]) -> None:
    """Run twistd as the order says (returns when the broker has stopped; twistd exits
    the process itself on a bad option or a start failure)."""
    from twisted.scripts.twistd import run

    os.chdir(order.get("cwd") or os.getcwd())
    for name in order.get("unset", ()):
        os.environ.pop(name, None)
    os.environ.update({str(k): str(v) for k, v in order.get("env", {}).items()})
    # As a cold start's, the broker's stdin is empty (and the launcher's pipe is free).
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.argv = ["-c", *(str(word) for word in order["argv"])]
    run()  # type: ignore[no-untyped-call]  # twistd is not annotated


def main(argv: list[str]) -> None:
    """``[--ready-fd N]``: once imported, close descriptor N (the launcher's pipe reads end
    of file there: the spare is ready)."""
    preload()
    if argv[:1] == ["--ready-fd"]:
        os.close(int(argv[1]))
    order = read_order(sys.stdin.buffer)
    if order is None:
        return
    become_broker(order)


if __name__ == "__main__":
    main(sys.argv[1:])
