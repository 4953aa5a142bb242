"""The broker core: what both protocols call (see :mod:`brokerd.core.broker`).

Packages: ``roles`` (the roles of the core's face and the long-poll primitive, below
every part), ``api`` (:class:`~brokerd.core.api.CoreApi`, the one typed face code
outside the core uses, above the parts), ``share`` (share groups' records). Modules:
``broker`` (the :class:`Broker` façade and service), ``policy`` (:class:`FsyncPolicy`),
``topics`` (open partitions, topic operations, auto-create), ``writer`` (per-partition
group commit), ``appends`` (what an append carries), ``producers`` (idempotent producers
on the reactor side), ``waiters`` (the long polls' park step), ``timers`` (periodic
tasks), ``pools`` (the worker pools' service), ``services`` (ordered shutdown, the log
directory's service), ``interfaces`` (typed views of storage and of the reactor's
threads).
"""

from brokerd.core.broker import Broker
from brokerd.core.policy import FsyncPolicy

__all__ = ["Broker", "FsyncPolicy"]
