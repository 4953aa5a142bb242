# -*- test-case-name: tests.storage.stores.test_client_metrics -*-
"""The durable client-metrics resources (KIP-714 subscriptions): ``client-metrics.json``
in the data directory.

The file maps each resource's name to its configs as strings, as an operator set them
(``{"version": 1, "resources": {"basic": {"metrics": "org.apache.kafka.producer.",
"interval.ms": "60000"}}}``), readable by eye. It is replaced as a whole with
:func:`brokerd.storage.fileio.atomic_write`: after a crash it holds the old set or the
new one. Loading bounds the file's size and the number of resources before it trusts
them, and refuses a file it cannot read whole (a lost subscription would silently stop
clients' pushes). What a config means is the Kafka listener's business; this module
only keeps strings.

Blocking (file I/O): the caller runs :meth:`ClientMetricsStore.save` in a thread. No
Twisted.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from brokerd.storage.json_document import DocumentFormat, JsonDocumentFile

#: The file's name in the data directory.
CLIENT_METRICS_FILE_NAME = "client-metrics.json"
#: Most client-metrics resources a broker keeps (a new one beyond it is refused).
MAX_RESOURCES = 1000
#: Largest file loaded: MAX_RESOURCES resources of a few hundred bytes each, with room.
MAX_FILE_BYTES = 4 * 1024 * 1024
_FORMAT_VERSION = 1
_FORMAT = DocumentFormat("client-metrics", "resources", dict, MAX_FILE_BYTES, _FORMAT_VERSION)

#: Resource name -> config name -> value.
Resources = Mapping[str, Mapping[str, str]]


class ClientMetricsFileError(Exception):
    """The file exists but cannot be trusted (too large, not the expected document)."""


class ClientMetricsStore:
    """``client-metrics.json`` at ``path``."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._file = JsonDocumentFile(path, MAX_FILE_BYTES)

    @classmethod
    def in_directory(cls, data_dir: str) -> ClientMetricsStore:
        return cls(os.path.join(data_dir, CLIENT_METRICS_FILE_NAME))

    def load(self) -> dict[str, dict[str, str]]:
        """The stored resources; none when the file does not exist.

        :raises ClientMetricsFileError: a file too large or not a valid document.
        """
        return self._file.load(decode, ValueError, ClientMetricsFileError) or {}

    def save(self, resources: Resources) -> None:
        self._file.save(encode(resources))


def encode(resources: Resources) -> bytes:
    return _FORMAT.encode(
        {name: dict(sorted(c.items())) for name, c in sorted(resources.items())}
    )


def decode(data: bytes) -> dict[str, dict[str, str]]:
    """The resources of a document; ValueError when it is not one."""
    resources = _FORMAT.decode(data, ValueError)
    if len(resources) > MAX_RESOURCES:
        raise ValueError(f"more than {MAX_RESOURCES} resources")
    out: dict[str, dict[str, str]] = {}
    for name, configs in resources.items():
        if not isinstance(configs, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in configs.items()
        ):
            raise ValueError(f"resource {name!r}: configs must be strings")
        out[name] = dict(configs)
    return out


__all__ = [
    "CLIENT_METRICS_FILE_NAME",
    "MAX_RESOURCES",
    "ClientMetricsFileError",
    "ClientMetricsStore",
]
