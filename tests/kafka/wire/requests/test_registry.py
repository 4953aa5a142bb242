"""The one registry of Kafka APIs (brokerd.kafka.wire.requests.registry): every API declared once,
with its messages, in a module of brokerd.kafka.wire.messages."""

from __future__ import annotations

import importlib
import pkgutil
import sys
import types
from pathlib import Path

import pytest

from brokerd.kafka.wire import messages
from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.requests import apis
from brokerd.kafka.wire.requests.registry import KEY_OF_RESPONSE, SPECS, collect
from brokerd.kafka.wire.schema import ApiSpec


def test_every_api_key_is_registered_once_with_its_range() -> None:
    assert set(SPECS) == set(ApiKey)
    for key, spec in SPECS.items():
        assert spec.key is key
        assert 0 <= spec.min_version <= spec.max_version
        assert apis.SUPPORTED_VERSIONS[key] == (spec.min_version, spec.max_version)
        assert KEY_OF_RESPONSE[spec.response] in SPECS


def test_every_message_module_declares_its_apis() -> None:
    for info in pkgutil.iter_modules(messages.__path__):
        module = importlib.import_module(f"{messages.__name__}.{info.name}")
        declared = getattr(module, "APIS", None)
        assert declared, f"{info.name} declares no APIS"
        for spec in declared:
            # The messages are the module's own: an API lives in one place.
            assert spec.request.__module__ == module.__name__
            assert spec.response.__module__ == module.__name__


def test_an_api_declared_twice_is_refused(tmp_path: Path) -> None:
    spec = SPECS[ApiKey.HEARTBEAT]
    for name in ("a", "b"):
        (tmp_path / f"{name}.py").write_text("")
        module = types.ModuleType(f"twice_pkg.{name}")
        module.APIS = (ApiSpec(spec.key, spec.request, spec.response, 0, 0),)  # type: ignore[attr-defined]
        sys.modules[module.__name__] = module
    try:
        with pytest.raises(ValueError, match="HEARTBEAT is declared twice"):
            collect([str(tmp_path)], "twice_pkg")
    finally:
        for name in ("a", "b"):
            del sys.modules[f"twice_pkg.{name}"]
