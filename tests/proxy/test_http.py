"""The REST Proxy's HTTP layer: JSON bodies bounded in depth."""

from __future__ import annotations

import pytest

from brokerd.proxy.errors import ProxyError
from brokerd.proxy.http import parse_json, too_deep


def test_json_bodies_are_bounded_in_depth() -> None:
    assert not too_deep(b'{"a": "[[[[[[[["}')
    assert too_deep(b"[" * 65 + b"]" * 65)
    with pytest.raises(ProxyError, match="nested deeper"):
        parse_json(b"[" * 100_000)
    with pytest.raises(ProxyError, match="not JSON"):
        parse_json(b"{")
