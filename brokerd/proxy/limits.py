"""The REST Proxy's bounds, documented in docs/http-proxy.md ("Limits"): every size and
count a client sends or makes the broker hold is checked against one of these before
anything is allocated for it.
"""

from __future__ import annotations

import attrs

#: Largest request body read; a larger Content-Length, or a chunked body growing past
#: it, is answered 413 (the bytes beyond are never kept).
MAX_BODY_BYTES = 4 * 1024 * 1024
#: Most records in one produce request (v2 ``records``, or one v3 stream).
MAX_RECORDS_PER_PRODUCE = 10_000
#: Most bytes of records one ``GET .../records`` answers (before their JSON
#: encoding, which base64 makes at most 4/3 of it plus per-record fields);
#: ``max_bytes`` asks for less, never more.
MAX_RECORDS_BYTES = 4 * 1024 * 1024
#: Default of ``max_bytes`` (Confluent's consumer.request.max.bytes is 64 MiB; a
#: bounded default here).
DEFAULT_RECORDS_BYTES = 1024 * 1024
#: Longest wait of a records call for data (``timeout`` and
#: ``consumer.request.timeout.ms`` are capped by it).
MAX_RECORDS_WAIT_MS = 30_000
#: Confluent's consumer.request.timeout.ms default.
DEFAULT_RECORDS_WAIT_MS = 1_000
#: Consumer instances one client address may hold, and all addresses together.
MAX_INSTANCES_PER_ADDRESS = 16
MAX_INSTANCES = 256
#: Confluent's consumer.instance.timeout.ms: an instance not used this long is
#: deleted (and leaves its group).
INSTANCE_TIMEOUT_MS = 300_000
#: Most topics in one subscription, and partitions in one assignment or seek.
MAX_SUBSCRIPTION_TOPICS = 1_000
MAX_PARTITIONS_PER_REQUEST = 10_000
#: Longest group, instance and topic names taken from a URL or body.
MAX_NAME_CHARS = 249
MAX_GROUP_CHARS = 255


@attrs.frozen
class ProxyLimits:
    """The bounds in force (the defaults above; tests pass smaller ones)."""

    max_body_bytes: int = MAX_BODY_BYTES
    max_records_per_produce: int = MAX_RECORDS_PER_PRODUCE
    max_records_bytes: int = MAX_RECORDS_BYTES
    max_records_wait_ms: int = MAX_RECORDS_WAIT_MS
    max_instances_per_address: int = MAX_INSTANCES_PER_ADDRESS
    max_instances: int = MAX_INSTANCES
    instance_timeout_ms: int = INSTANCE_TIMEOUT_MS
