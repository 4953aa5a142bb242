"""The time and timers every layer is handed, typed once: :class:`Seconds`,
:class:`Clock` and the :class:`DelayedCall` a timer returns.

Twisted declares the reactor's time through zope interfaces (``IReactorTime``,
``IDelayedCall``), whose methods lack ``self`` and so cannot be called through the
interface type under mypy; these ``typing.Protocol`` classes say the same in a form mypy
checks. A reactor and a ``twisted.internet.task.Clock`` satisfy :class:`Clock`, which is
what lets every timer be tested on a ``task.Clock``. Only declarations, no behaviour; it
imports nothing of brokerd, so the core, the connection layer, the protocols and the web
side may all use it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class DelayedCall(Protocol):
    """``IDelayedCall``: a scheduled call, as ``callLater`` returns it."""

    def active(self) -> bool: ...
    def cancel(self) -> None: ...
    def reset(self, seconds: float) -> None: ...


class Seconds(Protocol):
    """Something that tells the time the way ``IReactorTime.seconds`` does."""

    def seconds(self) -> float: ...


class Clock(Seconds, Protocol):
    """``IReactorTime``: the time, and timers."""

    def callLater(
        self, delay: float, callable: Callable[..., object], *args: object, **kw: object
    ) -> DelayedCall: ...


__all__ = ["Clock", "DelayedCall", "Seconds"]
