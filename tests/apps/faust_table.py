"""A plain Faust table app, run by tests/e2e/test_faust.py as a worker process.

Every record of the ``events`` topic sets ``latest[key] = value`` in a Faust Table, whose
changelog topic Faust creates itself with ``cleanup.policy=compact``. After a restart the
worker restores the table from that changelog alone. ``GET /table`` returns the table as
JSON; Faust starts its web server only after table recovery.

Nothing here knows about brokerd: the broker address, app id, web port and data directory
come from the environment (``FAUST_BROKER``, ``FAUST_APP_ID``, ``FAUST_WEB_PORT``,
``FAUST_DATADIR``), the rest is Faust's defaults except for shorter group timeouts, so a
worker that was killed is replaced within seconds rather than a minute.
"""

from __future__ import annotations

import os
from typing import Any

import faust

app = faust.App(
    os.environ.get("FAUST_APP_ID", "brokerd-table"),
    broker=f"kafka://{os.environ['FAUST_BROKER']}",
    store="memory://",
    datadir=os.environ.get("FAUST_DATADIR", "faust-data"),
    topic_partitions=1,
    topic_replication_factor=1,
    web_host="127.0.0.1",
    web_port=int(os.environ.get("FAUST_WEB_PORT", "6066")),
    broker_session_timeout=10.0,
    broker_heartbeat_interval=1.0,
    broker_commit_every=100,
    broker_commit_interval=1.0,
)

events = app.topic(
    "events", key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
)
latest = app.Table("latest", default=str, partitions=1)


@app.agent(events)
async def record_latest(stream: Any) -> None:
    async for key, value in stream.items():
        latest[key.decode()] = value.decode()


@app.page("/table")
async def table_view(web: Any, request: Any) -> Any:
    return web.json({"table": dict(latest.items())})


if __name__ == "__main__":
    app.main()
