"""The Schema Registry: Confluent's REST API over schemas kept in the compacted topic
``_schemas`` (docs/schema-registry.md).

``model`` holds the messages every layer shares; ``formats`` the three schema types
(parse, normalize, compatibility, payload codecs); ``serde`` Confluent's wire framing of
a serialized record; ``store`` the state rebuilt from ``_schemas``; ``service`` the
registry over the broker's core; ``http`` the REST resource.
"""
