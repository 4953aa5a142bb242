"""A Faust app whose records go through the Schema Registry, run by
tests/e2e/test_platform_judges.py as a worker process.

Records of ``sr-users`` are Avro ``User`` records in Confluent's framing (decoded by
python-schema-registry-client's Faust codec, which fetches the writer's schema by the id in
each record); each becomes a ``Greeting`` in ``sr-greetings``, encoded by the same kind of
codec, which registers its schema under ``sr-greetings-value`` on first use.

Nothing here knows about brokerd: the broker and registry addresses, app id, web port and
data directory come from the environment (``FAUST_BROKER``, ``SCHEMA_REGISTRY_URL``,
``FAUST_APP_ID``, ``FAUST_WEB_PORT``, ``FAUST_DATADIR``).
"""

from __future__ import annotations

import os
from typing import Any

import faust
from faust.serializers import codecs
from schema_registry.client import SchemaRegistryClient, schema
from schema_registry.serializers.faust import FaustSerializer

USER = {
    "type": "record",
    "name": "User",
    "namespace": "brokerd.judge",
    "fields": [{"name": "name", "type": "string"}],
}
GREETING = {
    "type": "record",
    "name": "Greeting",
    "namespace": "brokerd.judge",
    "fields": [{"name": "text", "type": "string"}, {"name": "length", "type": "int"}],
}

registry = SchemaRegistryClient(os.environ["SCHEMA_REGISTRY_URL"])
codecs.register("sr_user", FaustSerializer(registry, "sr-users-value", schema.AvroSchema(USER)))
codecs.register(
    "sr_greeting", FaustSerializer(registry, "sr-greetings-value", schema.AvroSchema(GREETING))
)


class User(faust.Record, serializer="sr_user"):
    name: str


class Greeting(faust.Record, serializer="sr_greeting"):
    text: str
    length: int


app = faust.App(
    os.environ.get("FAUST_APP_ID", "brokerd-registry"),
    broker=f"kafka://{os.environ['FAUST_BROKER']}",
    store="memory://",
    datadir=os.environ.get("FAUST_DATADIR", "faust-data"),
    topic_partitions=1,
    topic_replication_factor=1,
    web_host="127.0.0.1",
    web_port=int(os.environ.get("FAUST_WEB_PORT", "6066")),
    broker_session_timeout=10.0,
    broker_heartbeat_interval=1.0,
    broker_commit_interval=0.5,
)

users = app.topic("sr-users", value_type=User)
greetings = app.topic("sr-greetings", value_type=Greeting)


@app.agent(users)
async def greet(stream: Any) -> None:
    async for user in stream:
        text = f"hello, {user.name}"
        await greetings.send(value=Greeting(text=text, length=len(text)))


if __name__ == "__main__":
    app.main()
