"""A Faust copy app with ``processing_guarantee="exactly_once"``, run by
tests/test_transactions_faust.py as a worker process.

Every record of ``eos-in`` becomes one record ``out:<value>`` (same key) in ``eos-out``.
Under exactly-once Faust writes the output and the input offsets in one Kafka transaction
per source partition, and reads with isolation level read_committed; a worker killed
mid-transaction leaves only an unfinished transaction behind, which the next worker's
producer aborts (same transactional id) before it carries on from the committed offsets.

Nothing here knows about brokerd: the broker address, app id, web port and data directory
come from the environment (``FAUST_BROKER``, ``FAUST_APP_ID``, ``FAUST_WEB_PORT``,
``FAUST_DATADIR``); group timeouts are short so a restarted worker takes over in seconds.
"""

from __future__ import annotations

import os
from typing import Any

import faust

app = faust.App(
    os.environ.get("FAUST_APP_ID", "brokerd-eos"),
    broker=f"kafka://{os.environ['FAUST_BROKER']}",
    store="memory://",
    datadir=os.environ.get("FAUST_DATADIR", "faust-data"),
    processing_guarantee="exactly_once",
    topic_partitions=1,
    topic_replication_factor=1,
    web_host="127.0.0.1",
    web_port=int(os.environ.get("FAUST_WEB_PORT", "6066")),
    broker_session_timeout=10.0,
    broker_heartbeat_interval=1.0,
    broker_commit_every=50,
    broker_commit_interval=0.5,
)

source = app.topic(
    "eos-in", key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
)
sink = app.topic(
    "eos-out", key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
)


@app.agent(source)
async def copy(stream: Any) -> None:
    async for key, value in stream.items():
        await sink.send(key=key, value=b"out:" + value)


if __name__ == "__main__":
    app.main()
