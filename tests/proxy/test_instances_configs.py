"""A REST Proxy consumer's configs, parsed and refused."""

from __future__ import annotations

import pytest

from brokerd.proxy.embedded import EmbeddedFormat
from brokerd.proxy.errors import ProxyError
from brokerd.proxy.instances import OffsetReset, parse_config


def test_consumer_configs() -> None:
    config = parse_config({"format": "json", "auto.offset.reset": "earliest",
                           "auto.commit.enable": "false", "fetch.min.bytes": "10"})
    assert config.format is EmbeddedFormat.JSON
    assert config.auto_offset_reset is OffsetReset.EARLIEST
    assert not config.auto_commit and config.fetch_min_bytes == 10
    assert parse_config({}).auto_offset_reset is OffsetReset.LATEST
    for bad in ({"format": "xml"}, {"auto.offset.reset": "middle"},
                {"auto.commit.enable": "maybe"}, {"consumer.request.timeout.ms": "-1"}):
        with pytest.raises(ProxyError) as refused:
            parse_config(bad)
        assert refused.value.error_code == 42204
