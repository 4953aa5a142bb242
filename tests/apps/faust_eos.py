"""A Faust copy app with ``processing_guarantee="exactly_once"``, run by
tests/e2e/test_faust_transactions.py as a worker process.

Every record of ``eos-in`` becomes one record ``out:<value>`` (same key) in ``eos-out``
(a second agent reads ``eos-out``, see ``outputs`` below).
Under exactly-once Faust writes the output and the input offsets in one Kafka transaction
per source partition, and reads with isolation level read_committed; a worker killed
mid-transaction leaves only an unfinished transaction behind, which the next worker's
producer aborts (same transactional id) before it carries on from the committed offsets.

Nothing here knows about brokerd: the broker address, app id, web port and data directory
come from the environment (``FAUST_BROKER``, ``FAUST_APP_ID``, ``FAUST_WEB_PORT``,
``FAUST_DATADIR``, and ``FAUST_EOS_DELAY_MS`` per record); group timeouts are short so a
restarted worker takes over in seconds.
"""

from __future__ import annotations

import asyncio
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


#: Seconds spent on each record, so that a test can kill the worker while it is busy.
DELAY = float(os.environ.get("FAUST_EOS_DELAY_MS", "0")) / 1000


@app.agent(source)
async def copy(stream: Any) -> None:
    async for key, value in stream.items():
        if DELAY:
            await asyncio.sleep(DELAY)
        await sink.send(key=key, value=b"out:" + value)


@app.agent(sink)
async def outputs(stream: Any) -> None:
    """Reads the outputs (read_committed) and does nothing with them. Its point: Faust
    sends an output inside the transaction only if its consumer has the output topic's
    metadata, which it only fetches for topics it subscribes to; without a reader of
    ``eos-out`` every output would go out through the plain producer."""
    async for _value in stream:
        pass


if __name__ == "__main__":
    app.main()
