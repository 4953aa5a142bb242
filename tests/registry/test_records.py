"""``_schemas`` records both ways: what Confluent's Schema Registry and Karapace write is
read, and what brokerd writes is spelled as Confluent spells it."""

from __future__ import annotations

import json

from twisted.trial.unittest import SynchronousTestCase

from brokerd.registry.model import (
    Compatibility,
    Mode,
    RegisteredSchema,
    Schema,
    SchemaReference,
    SchemaType,
)
from brokerd.registry.records import (
    ClearSubject,
    ConfigRecord,
    DeleteSubject,
    ModeRecord,
    Noop,
    SchemaRecord,
    SchemaTombstone,
    UnreadableRecord,
    decode_record,
    encode_record,
)

AVRO = '{"type":"record","name":"User","fields":[{"name":"name","type":"string"}]}'


class ConfluentFormatTests(SynchronousTestCase):
    def test_schema_key_and_value_as_confluent_writes_them(self) -> None:
        record = SchemaRecord(RegisteredSchema("users-value", 1, 7, Schema(SchemaType.AVRO, AVRO)))
        key, value = encode_record(record)
        self.assertEqual(
            key, b'{"keytype":"SCHEMA","subject":"users-value","version":1,"magic":1}'
        )
        assert value is not None
        self.assertEqual(list(json.loads(value)), [
            "subject", "version", "id", "references", "schema", "deleted"
        ])
        self.assertEqual(decode_record(key, value), record)

    def test_protobuf_carries_its_type_and_references(self) -> None:
        schema = Schema(SchemaType.PROTOBUF, 'syntax = "proto3";',
                        (SchemaReference("other.proto", "other", 2),))
        record = SchemaRecord(RegisteredSchema("s", 3, 9, schema, deleted=True))
        key, value = encode_record(record)
        assert value is not None
        self.assertEqual(json.loads(value)["schemaType"], "PROTOBUF")
        self.assertEqual(json.loads(value)["references"],
                         [{"name": "other.proto", "subject": "other", "version": 2}])
        self.assertEqual(decode_record(key, value), record)

    def test_config_mode_and_subject_records(self) -> None:
        cases = [
            (ConfigRecord(None, Compatibility.FULL),
             b'{"keytype":"CONFIG","subject":null,"magic":0}', b'{"compatibilityLevel":"FULL"}'),
            (ConfigRecord("s", None), b'{"keytype":"CONFIG","subject":"s","magic":0}', None),
            (ModeRecord(None, Mode.IMPORT),
             b'{"keytype":"MODE","subject":null,"magic":0}', b'{"mode":"IMPORT"}'),
            (DeleteSubject("s", 4), b'{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}',
             b'{"subject":"s","version":4}'),
            (ClearSubject("s"), b'{"keytype":"CLEAR_SUBJECT","subject":"s","magic":0}',
             b'{"subject":"s"}'),
            (SchemaTombstone("s", 2),
             b'{"keytype":"SCHEMA","subject":"s","version":2,"magic":1}', None),
        ]
        for record, key, value in cases:
            self.assertEqual(encode_record(record), (key, value))
            self.assertEqual(decode_record(key, value), record)

    def test_reads_karapace_key_order_and_newer_fields(self) -> None:
        # Karapace's deprecated key order, and fields of newer Confluent releases.
        key = b'{"subject": "s", "version": 1, "magic": 1, "keytype": "SCHEMA"}'
        value = json.dumps({
            "subject": "s", "version": 1, "id": 3, "schema": AVRO, "deleted": False,
            "metadata": {"properties": {"owner": "x"}}, "ruleSet": None,
        }).encode()
        record = decode_record(key, value)
        assert isinstance(record, SchemaRecord)
        self.assertEqual(record.registered.schema_id, 3)
        self.assertEqual(record.registered.schema.schema_type, SchemaType.AVRO)
        config = decode_record(b'{"keytype":"CONFIG","subject":"s","magic":0}',
                               b'{"compatibilityLevel":"NONE","normalize":true,"alias":null}')
        self.assertEqual(config, ConfigRecord("s", Compatibility.NONE))
        self.assertEqual(decode_record(b'{"keytype":"NOOP","magic":0}', None), Noop())

    def test_unreadable_records_say_why(self) -> None:
        for key, value, why in [
            (None, b"{}", "without a key"),
            (b"not json", None, "not JSON"),
            (b"[1]", None, "not a JSON object"),
            (b'{"keytype":"WHAT","magic":0}', None, "unknown KeyType"),
            (b'{"keytype":"SCHEMA","subject":"s","magic":1}', b"{}", "integer 'version'"),
            (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}', b'{"id":1}',
             "string 'schema'"),
            (b'{"keytype":"CONFIG","subject":null,"magic":0}',
             b'{"compatibilityLevel":"SOMETIMES"}', "unknown Compatibility"),
        ]:
            with self.assertRaises(UnreadableRecord) as caught:
                decode_record(key, value)
            self.assertIn(why, str(caught.exception))
