"""The REST Proxy's partitioner: Kafka's murmur2 and where a keyed record goes."""

from __future__ import annotations

import pytest

from brokerd.proxy.produce import key_partition, murmur2


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        # Kafka's own vectors of Utils.murmur2 (clients' UtilsTest).
        ("21", -973932308),
        ("foobar", -790332482),
        ("a-little-bit-long-string", -985981536),
        ("a-little-bit-longer-string", -1486304829),
        ("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        ("abc", 479470107),
    ],
)
def test_murmur2_is_kafkas(key: str, expected: int) -> None:
    assert murmur2(key.encode()) == expected


def test_a_keyed_record_goes_where_a_kafka_producer_puts_it() -> None:
    assert key_partition(b"21", 3) == (-973932308 & 0x7FFFFFFF) % 3
    assert {key_partition(b"k%d" % i, 4) for i in range(100)} == {0, 1, 2, 3}
