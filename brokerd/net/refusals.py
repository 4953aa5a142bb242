"""Logging refusals at a bounded rate.

A client refused at the edge (too many connections, a frame too large before it
authenticated) may retry at once, as fast as it likes; logging each refusal would let it
fill the log. :class:`RefusalLog` counts every refusal and logs the first and then every
:data:`LOG_EVERY`-th, with the count so far.
"""

from __future__ import annotations

from typing import Any

from twisted.logger import Logger

__all__ = ["LOG_EVERY", "RefusalLog"]

#: Refusals are logged at the first and then every this many.
LOG_EVERY = 100


class RefusalLog:
    """Counts refusals of one kind; logs some of them (see the module docstring)."""

    _log = Logger()

    def __init__(self) -> None:
        self.count = 0

    def refused(self, message: str, **fields: Any) -> None:
        """Count one; log ``message`` (a log format, with ``{refused}`` available) when
        its turn comes."""
        if self.count % LOG_EVERY == 0:
            self._log.warn(message + " ({refused} refused so far)", refused=self.count + 1,
                           **fields)
        self.count += 1
