"""The ``--fsync`` setting, parsed; what each mode promises is in
``docs/operations.md`` ("Durability").

``always``: an append is answered, and readable, only after ``fdatasync`` (appends that
arrive during a sync share the next one). ``interval:MS``: answered once written to the
kernel; dirty partitions are synced every MS milliseconds. ``never``: as ``interval``
without the timer. Parsing only: the writer and the timers apply it.
"""

from __future__ import annotations

from typing import Literal

import attrs


@attrs.frozen
class FsyncPolicy:
    """The ``--fsync`` setting: ``always``, ``interval:MS`` or ``never``."""

    mode: Literal["always", "interval", "never"]
    interval_ms: int = 0

    @classmethod
    def parse(cls, text: str) -> FsyncPolicy:
        if text == "always":
            return cls("always")
        if text == "never":
            return cls("never")
        if text.startswith("interval:"):
            try:
                ms = int(text.split(":", 1)[1])
            except ValueError:
                ms = 0
            if ms > 0:
                return cls("interval", ms)
        raise ValueError(f"--fsync must be always, never or interval:MS (MS > 0), not {text!r}")

    @property
    def sync_every_append(self) -> bool:
        return self.mode == "always"

    def __str__(self) -> str:
        return f"interval:{self.interval_ms}" if self.mode == "interval" else self.mode
