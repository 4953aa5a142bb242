# -*- test-case-name: tests.kafka.wire.test_codec -*-
"""The one table of the Kafka APIs brokerd answers, collected from the message modules.

Every module under :mod:`brokerd.kafka.wire.messages` ends with ``APIS`` (its
:class:`~brokerd.kafka.wire.schema.ApiSpec` declarations); :data:`SPECS` is their union,
keyed by API key, built once at import. An API declared twice is an error at import.
Adding an API's messages is adding them (and their ``ApiSpec``) to a message module:
nothing here names an API.

Pure: no I/O, no Twisted.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from brokerd.kafka.wire import messages
from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.schema import ApiSpec


def collect(package_path: list[str], package_name: str) -> dict[ApiKey, ApiSpec[Any, Any]]:
    """The ``APIS`` of every module of a package, by key, in key order."""
    found: dict[ApiKey, ApiSpec[Any, Any]] = {}
    for info in sorted(pkgutil.iter_modules(package_path), key=lambda m: m.name):
        module = importlib.import_module(f"{package_name}.{info.name}")
        for spec in getattr(module, "APIS", ()):
            if spec.key in found:
                raise ValueError(f"{spec.key.name} is declared twice ({info.name})")
            found[spec.key] = spec
    return dict(sorted(found.items()))


#: Every API brokerd answers (what ApiVersions advertises), by key.
SPECS: Mapping[ApiKey, ApiSpec[Any, Any]] = MappingProxyType(
    collect(list(messages.__path__), messages.__name__)
)

#: The API a response class answers (each API has a response class of its own: even
#: IncrementalAlterConfigs, AlterConfigs' layout, is flexible from another version).
KEY_OF_RESPONSE: Mapping[type, ApiKey] = MappingProxyType(
    {spec.response: key for key, spec in SPECS.items()}
)


__all__ = ["KEY_OF_RESPONSE", "SPECS", "collect"]
