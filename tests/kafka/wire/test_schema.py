"""The schema layer (brokerd.kafka.wire.schema): each field declared once, in its
attribute's annotation, and planned per version the first time a class is used."""

from __future__ import annotations

import uuid
from typing import Annotated

import attrs
import pytest

from brokerd.kafka.wire import codec
from brokerd.kafka.wire.codec import INT16, INT32, STRING, Array, Struct
from brokerd.kafka.wire.requests import apis
from brokerd.kafka.wire.requests.registry import SPECS
from brokerd.kafka.wire.schema import Wire, wire_message


@wire_message
@attrs.frozen(kw_only=True)
class _Item:
    id: Annotated[int, Wire(INT32)]


@wire_message
@attrs.frozen(kw_only=True)
class _Versioned:
    a: Annotated[int, Wire(INT16)]
    b: Annotated[str | None, Wire(STRING, 2, nullable_from=3)] = None
    gone: Annotated[int, Wire(INT32, 0, 1)] = 0
    items: Annotated[tuple[_Item, ...], Wire(Array(Struct(_Item)), 1)] = ()


def test_fields_come_from_the_annotations_in_attribute_order() -> None:
    assert [f.name for f in _Versioned.FIELDS] == ["a", "b", "gone", "items"]  # type: ignore[attr-defined]
    (b,) = [f for f in _Versioned.FIELDS if f.name == "b"]  # type: ignore[attr-defined]
    assert (b.min_version, b.max_version, b.nullable_from) == (2, 0x7FFF, 3)


@pytest.mark.parametrize(
    ("version", "present"),
    [(0, ["a", "gone"]), (1, ["a", "gone", "items"]), (2, ["a", "b", "items"]),
     (3, ["a", "b", "items"]), (40, ["a", "b", "items"])],
)
def test_each_version_reads_and_writes_its_fields(version: int, present: list[str]) -> None:
    assert [f.name for f in codec.iter_fields(_Versioned, version)] == present
    items = (_Item(id=1),) if version else ()
    value = _Versioned(a=7, b="x" if version >= 2 else None, items=items)
    data = codec.encode_struct(value, version)
    assert codec.decode_struct(_Versioned, data, version) == value


def test_null_only_where_declared() -> None:
    codec.encode_struct(_Versioned(a=1, b=None), 3)
    with pytest.raises(ValueError, match="may not be null"):
        codec.encode_struct(_Versioned(a=1, b=None), 2)


def test_a_class_is_planned_the_first_time_it_is_written_or_read() -> None:
    # A start builds some 300 message classes; planning them waits for their first use.
    @wire_message
    @attrs.frozen(kw_only=True)
    class _Fresh:
        id: Annotated[int, Wire(INT32)]

    assert _Fresh not in codec._LAYOUTS
    assert codec.decode_struct(_Fresh, codec.encode_struct(_Fresh(id=5), 0), 0) == _Fresh(id=5)
    assert _Fresh in codec._LAYOUTS


@pytest.mark.parametrize("key", list(SPECS), ids=lambda key: key.name)
def test_every_api_plans_each_version_it_answers(key: codec.ApiKey) -> None:
    # What planning at import used to check for every class, for every version served.
    spec = SPECS[key]
    for cls in (spec.request, spec.response):
        names = {a.name for a in attrs.fields(cls)}
        for version in range(spec.min_version, spec.max_version + 1):
            plan = codec._layout(cls).plan(version)
            assert [name for name, _, _ in plan] == [
                f.name for f in codec.iter_fields(cls, version)
            ], (cls.__name__, version)
            assert {name for name, _, _ in plan} <= names


def test_an_attribute_without_a_wire_declaration_is_refused() -> None:
    with pytest.raises(TypeError, match=r"_Bad\.plain has no Wire"):
        @wire_message
        @attrs.frozen(kw_only=True)
        class _Bad:
            declared: Annotated[int, Wire(INT32)]
            plain: int = 0


def test_the_response_frame_is_joined_once_and_equals_the_two_step_frame() -> None:
    body = apis.ProduceResponse(responses=(apis.ProduceTopicResponse(name="t"),))
    assert apis.encode_response(9, 8, body) == codec.response_frame(9, codec.encode_frame(body, 8))
    w = codec.Writer()
    w.int32(1)
    w.raw(b"x" * 5000)
    frame = w.response_frame(3, flexible_header=True)
    assert frame == codec.response_frame(3, w.getframe(), flexible_header=True)


@wire_message
@attrs.frozen(kw_only=True)
class _WithTopicId:
    topic_id: Annotated[uuid.UUID, Wire(codec.UUID)] = codec.ZERO_UUID


def test_a_uuid_is_its_sixteen_bytes() -> None:
    topic_id = uuid.UUID("0123456789abcdef0123456789abcdef")
    data = codec.encode_struct(_WithTopicId(topic_id=topic_id), 0)
    assert data == topic_id.bytes
    assert codec.decode_struct(_WithTopicId, data, 0).topic_id == topic_id
    with pytest.raises(codec.MalformedRequest):
        codec.decode_struct(_WithTopicId, data[:15], 0)
