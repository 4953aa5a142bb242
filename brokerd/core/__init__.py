"""The broker core: what both protocols call (see :mod:`brokerd.core.broker`).

Modules: ``api`` (:class:`~brokerd.core.api.CoreApi`, the one typed face code outside
the core uses, and the long-poll primitive), ``broker`` (the :class:`Broker` façade and
service), ``policy`` (:class:`FsyncPolicy`), ``topics`` (open partitions, topic
operations, auto-create), ``writer`` (per-partition group commit), ``appends`` (what an
append carries), ``producers`` (idempotent producers on the reactor side), ``waiters``
(long polls), ``timers`` (periodic tasks), ``pools`` (the worker pools' service),
``services`` (ordered shutdown, the log directory's service), ``interfaces`` (typed
views of storage and of the reactor's threads).
"""

from brokerd.core.broker import Broker
from brokerd.core.policy import FsyncPolicy

__all__ = ["Broker", "FsyncPolicy"]
