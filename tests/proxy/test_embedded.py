"""The REST Proxy's embedded formats: content types, and the plain formats both ways."""

from __future__ import annotations

import pytest

from brokerd.proxy.embedded import (
    EmbeddedFormat,
    accepted_formats,
    decode,
    encode_plain,
    produce_format,
)
from brokerd.proxy.errors import ProxyError


def test_content_types() -> None:
    assert produce_format("application/vnd.kafka.json.v2+json") is EmbeddedFormat.JSON
    assert produce_format("application/vnd.kafka.avro.v2+json; charset=utf-8") is (
        EmbeddedFormat.AVRO)
    with pytest.raises(ProxyError) as refused:
        produce_format("application/json")
    assert (refused.value.http_status, refused.value.error_code) == (415, 40601)
    assert accepted_formats("application/vnd.kafka.binary.v2+json, */*") == [
        EmbeddedFormat.BINARY, None]
    assert EmbeddedFormat.JSONSCHEMA.content_type == "application/vnd.kafka.jsonschema.v2+json"


def test_plain_formats_both_ways() -> None:
    assert encode_plain(EmbeddedFormat.JSON, {"a": [1, "é"]}) == '{"a":[1,"é"]}'.encode()
    assert encode_plain(EmbeddedFormat.JSON, None) is None
    assert encode_plain(EmbeddedFormat.BINARY, "AAEC") == b"\x00\x01\x02"
    assert decode(EmbeddedFormat.BINARY, b"\x00\x01\x02", None) == "AAEC"
    assert decode(EmbeddedFormat.JSON, b'{"a":1}', None) == {"a": 1}
    with pytest.raises(ProxyError, match="not base64"):
        encode_plain(EmbeddedFormat.BINARY, "not base64!")
    with pytest.raises(ProxyError, match="not JSON"):
        decode(EmbeddedFormat.JSON, b"\xff", None)
    with pytest.raises(ProxyError, match="not framed"):
        decode(EmbeddedFormat.AVRO, b"plain", None)
