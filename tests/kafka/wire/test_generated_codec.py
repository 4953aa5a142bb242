"""The generated readers and writers (``read_struct`` / ``write_struct``) against the
field-by-field path they stand in for, for every message class brokerd answers, at every
supported version, in both directions.

The reference is the schema engine itself: each field's ``WireType.read``/``write``,
nested structs walked by the test (:func:`_generic_read`, :func:`_generic_write`), with
``codec.read_struct``/``write_struct`` pointed back at them while it runs, so a struct
type that calls them (a nullable struct) is generic all the way down too.

- Reading: every prefix of an encoded body (each a truncation somewhere), the body with a
  null forged at every position, and the body with a byte forged to 0xff at every
  position (long varints, bad UTF-8, negative lengths and counts) or to 0x80 (a
  non-canonical varint), read to the same value and position or the same error
  (bodies over 60 bytes: every k-th position).
- Writing: a sample of every class, the same with every nullable field null, with long
  strings, bytes and arrays (multi-byte varints), and with one field anywhere set to
  null or to an integer that does not fit, encode to the same bytes or the same error.
"""

from __future__ import annotations

import contextlib
import struct
import uuid
from collections.abc import Iterator
from typing import Any

import attrs
import pytest

from brokerd.kafka.wire import codec
from brokerd.kafka.wire.messages.cluster import DescribeClusterResponse
from brokerd.kafka.wire.requests import apis
from brokerd.kafka.wire.requests.apis import SUPPORTED_VERSIONS
from brokerd.kafka.wire.requests.registry import SPECS
from brokerd.net.frames import Frame, SplicedFrame
from brokerd.storage.types import StoredRecords

# -- the field-by-field reference -----------------------------------------------------


def _generic_read(cls: type[Any], r: codec.Reader, version: int) -> Any:
    """The field-by-field reading the generated readers stand in for."""
    plan = codec._layout(cls).plan(version)
    kwargs = {}
    for name, t, nullable in plan:
        if type(t) is codec.Struct:
            kwargs[name] = _generic_read(t.cls, r, version)
        elif type(t) is codec.Array and type(t.item) is codec.Struct:
            item = t.item
            size = item.min_size(version, r.flexible)
            n = r.compact_array_count(size) if r.flexible else r.array_count(size)
            if n is None:
                if not nullable:
                    raise codec.MalformedRequest("null array where the schema forbids it")
                kwargs[name] = None
            else:
                kwargs[name] = tuple(_generic_read(item.cls, r, version) for _ in range(n))
        else:
            kwargs[name] = t.read(r, version, nullable)
    if r.flexible:
        r.skip_tagged_fields()
    return cls(**kwargs)


def _generic_write(w: codec.Writer, obj: Any, version: int) -> None:
    """The field-by-field writing the generated writers stand in for."""
    layout = codec._layout(type(obj))
    for name, t, nullable in layout.plan(version):
        value = getattr(obj, name)
        if type(t) is codec.Array and type(t.item) is codec.Struct and value is not None:
            if w.flexible:
                w.compact_array_count(len(value))
            else:
                w.int32(len(value))
            for item in value:
                _generic_write(w, item, version)
        elif type(t) is codec.Struct:
            _generic_write(w, value, version)
        else:
            t.write(w, value, version, nullable)
    if w.flexible:
        if layout.tagged is None:
            w.empty_tagged_fields()
        else:
            tags = layout.tagged(version)
            w.uvarint(len(tags))
            for tag, data in tags:
                w.uvarint(tag)
                w.uvarint(len(data))
                w.raw(data)


@contextlib.contextmanager
def _generic() -> Iterator[None]:
    """``codec.read_struct``/``write_struct`` as the reference while it runs (a
    ``Struct`` subclass's ``read``/``write`` call them)."""
    read, write = codec.read_struct, codec.write_struct
    codec.read_struct = _generic_read
    codec.write_struct = _generic_write
    try:
        yield
    finally:
        codec.read_struct, codec.write_struct = read, write


def _outcome(cls: type[Any], data: bytes, version: int, flexible: bool, generic: bool) -> Any:
    r = codec.Reader(data, flexible=flexible)
    try:
        if generic:
            with _generic():
                value = _generic_read(cls, r, version)
        else:
            value = codec.read_struct(cls, r, version)
    except codec.MalformedRequest as e:
        return ("error", str(e))
    return ("value", value, r.pos)


def _written(obj: Any, version: int, flexible: bool, generic: bool) -> Any:
    w = codec.Writer(flexible=flexible)
    try:
        if generic:
            with _generic():
                _generic_write(w, obj, version)
        else:
            codec.write_struct(w, obj, version)
    except (ValueError, TypeError, AttributeError, struct.error) as e:
        return ("error", type(e).__name__, str(e))
    # (response_frame cuts a spliced frame by the parts marked as parts of their own.)
    return ("frame", _parts(w.getframe()), _parts(w.response_frame(7, flexible)))


def _parts(frame: Frame) -> Any:
    """A frame as bytes, or a spliced frame's parts (bytes, or the region objects)."""
    if isinstance(frame, SplicedFrame):
        return ("spliced", frame.size, tuple(
            p if isinstance(p, bytes) else ("region", id(p)) for p in frame.parts
        ))
    return frame


# -- samples of every class --------------------------------------------------------------

_INTS = {
    id(codec.INT8): -5, id(codec.INT16): 300, id(codec.INT32): -70_000,
    id(codec.INT64): 2**40 + 3, id(codec.UINT16): 0xFFF0,
}


def _sample(t: Any, version: int, size: int) -> Any:
    """A value of wire type ``t``; ``size`` is how long strings, bytes and arrays are."""
    if id(t) in _INTS:
        return _INTS[id(t)]
    if t is codec.BOOL:
        return True
    if t is codec.FLOAT64:
        return 1.5
    if t is codec.STRING:
        return "é" + "s" * (size - 2)
    if t is codec.BYTES:
        return b"b" * size
    if t is codec.UUID:
        return uuid.UUID(int=0x1234_5678)
    if isinstance(t, codec.Array):
        # Struct arrays hold one item in the short sample, two in the long one (their
        # sizes multiply with the nesting).
        # (The items of a long array of strings are short: its count is what is long.)
        if isinstance(t.item, codec.Struct):
            return tuple(_sample(t.item, version, size) for _ in range(1 + (size > 3)))
        return tuple(_sample(t.item, version, 3) for _ in range(size))
    assert isinstance(t, codec.Struct), t
    return _instance(t.cls, version, size)


def _instance(cls: type[Any], version: int, size: int) -> Any:
    # Every attribute, on the wire at this version or not (some have no default).
    return cls(**{f.name: _sample(f.type, version, size) for f in cls.FIELDS})


def _paths(obj: Any, version: int) -> Iterator[tuple[tuple[Any, ...], Any, bool]]:
    """``(path, wire type, nullable)`` of every field on the wire in ``obj``; a path is
    attribute names and array indexes."""
    for name, t, nullable in codec._layout(type(obj)).plan(version):
        yield (name,), t, nullable
        value = getattr(obj, name)
        if isinstance(t, codec.Struct) and value is not None:
            for path, sub, n in _paths(value, version):
                yield (name, *path), sub, n
        elif isinstance(t, codec.Array) and isinstance(t.item, codec.Struct) and value:
            for path, sub, n in _paths(value[0], version):
                yield (name, 0, *path), sub, n


def _replace(obj: Any, path: tuple[Any, ...], value: Any) -> Any:
    """``obj`` with the field at ``path`` set to ``value`` (bypassing converters)."""
    head, *rest = path
    if isinstance(obj, tuple):
        return (*obj[:head], _replace(obj[head], tuple(rest), value) if rest else value,
                *obj[head + 1:])
    new = attrs.evolve(obj)
    inner = _replace(getattr(obj, head), tuple(rest), value) if rest else value
    object.__setattr__(new, head, inner)
    return new


def _nulled(obj: Any, version: int, outer: bool) -> Any:
    """``obj`` with its nullable fields null: every one (the outermost win) if
    ``outer``, else only those with no nullable field inside them."""
    nullable = [path for path, _, n in _paths(obj, version) if n]
    for path in nullable:
        inside = [p for p in nullable if len(p) > len(path) and p[: len(path)] == path]
        if outer or not inside:
            with contextlib.suppress(IndexError, AttributeError, TypeError, ValueError):
                obj = _replace(obj, path, None)
    return obj


@attrs.define
class _Region:
    """A file region as a spliced frame holds it (brokerd.storage.types.FileRegion)."""

    position: int = 0
    length: int = 300
    released: bool = False


_CASES = [
    pytest.param(spec.request if kind == "request" else spec.response, version,
                 id=f"{key.name}-v{version}-{kind}")
    for key, (lo, hi) in sorted(SUPPORTED_VERSIONS.items())
    for spec in [SPECS[key]]
    for version in range(lo, hi + 1)
    for kind in ("request", "response")
]


# -- the tests -------------------------------------------------------------------------


@pytest.mark.parametrize(("cls", "version"), _CASES)
def test_generated_writer_matches_the_generic_path(cls: type[Any], version: int) -> None:
    flexible = codec.is_flexible(cls, version)
    short = _instance(cls, version, 3)
    messages = [short, _nulled(short, version, outer=True), _nulled(short, version, outer=False),
                _instance(cls, version, 130)]
    for path, t, _ in _paths(short, version):
        messages.append(_replace(short, path, None))
        if id(t) in _INTS:
            messages.append(_replace(short, path, 2**70))
        if t is codec.BYTES:  # a Fetch answer's records: stored, short or long, or a region
            for records in (b"r" * 20, b"r" * 20_000, _Region()):
                messages.append(_replace(short, path, StoredRecords(records)))  # type: ignore[arg-type]
            messages.append(_replace(short, path, bytearray(b"r" * 5)))
            messages.append(_replace(short, path, b"r" * 20_000))
    for message in messages:
        assert _written(message, version, flexible, generic=False) == \
            _written(message, version, flexible, generic=True), message


@pytest.mark.parametrize(("cls", "version"), _CASES)
def test_generated_reader_matches_the_generic_path(cls: type[Any], version: int) -> None:
    flexible = codec.is_flexible(cls, version)
    null = b"\x00" if flexible else b"\xff\xff\xff\xff"

    def same(data: bytes) -> None:
        # (repr: a forged 0xff makes a float64 a NaN, which equals nothing.)
        assert repr(_outcome(cls, data, version, flexible, generic=False)) == \
            repr(_outcome(cls, data, version, flexible, generic=True)), data

    short = _instance(cls, version, 3)
    long = _instance(cls, version, 130)
    for message in (short, _nulled(short, version, True), _nulled(short, version, False), long):
        written = _written(message, version, flexible, generic=True)
        assert written[0] == "frame", written
        data = written[1]
        assert isinstance(data, bytes)
        same(data)
        # Every position up to 60 bytes (the Produce and Fetch samples are shorter),
        # every k-th of longer bodies (the suite's time); the long sample (two-byte
        # varints) at about 8 positions.
        step = 1 + len(data) // (8 if message is long else 60)
        for end in range(0, len(data), step):
            same(data[:end])
        for at in range(0, len(data), step):
            same(data[:at] + null + data[at + len(null):])
            same(data[:at] + b"\xff" + data[at + 1:])
            same(data[:at] + b"\x80" + data[at + 1:])


def test_every_answered_api_is_covered() -> None:
    covered = {(cls, version) for cls, version in (p.values for p in _CASES)}
    for key, (lo, hi) in SUPPORTED_VERSIONS.items():
        for version in range(lo, hi + 1):
            assert (SPECS[key].request, version) in covered
            assert (SPECS[key].response, version) in covered


def test_the_generated_reader_is_one_function_with_its_nested_structs_inline() -> None:
    source = codec.reader_source(apis.ProduceRequest, 10)
    assert source.count("def ") == 1
    assert source.startswith("def read_ProduceRequest_v10_flexible(r):")
    # ProduceTopicData and ProducePartitionData are read inline, not by a call.
    assert "read_struct(" not in source
    assert "ProduceTopicData_" in source and "ProducePartitionData_" in source
    # acks and timeout_ms: one unpack of ">hi" behind one bounds check.
    assert "if pos + 6 <= end:" in source
    body = apis.ProduceRequest(acks=-1, timeout_ms=5, topic_data=(apis.ProduceTopicData(
        name="t", partition_data=(apis.ProducePartitionData(index=0, records=b"r"),)),))
    data = codec.encode_struct(body, 10)
    assert codec.decode_struct(apis.ProduceRequest, data, 10) == body
    assert codec.writer_source(apis.ProduceRequest, 10).startswith(
        "def write_ProduceRequest_v10_flexible(w, obj):"
    )


def test_generated_functions_are_made_once_and_on_first_use() -> None:
    key = (DescribeClusterResponse, 1, True)
    codec._READ_FUNCS.pop(key, None)
    codec._WRITE_FUNCS.pop(key, None)
    body = DescribeClusterResponse(cluster_id="c", controller_id=0)
    data = codec.encode_struct(body, 1)
    write = codec._WRITE_FUNCS[key]
    assert codec.decode_struct(DescribeClusterResponse, data, 1) == body
    read = codec._READ_FUNCS[key]
    codec.decode_struct(DescribeClusterResponse, codec.encode_struct(body, 1), 1)
    assert codec._READ_FUNCS[key] is read and codec._WRITE_FUNCS[key] is write


def _header_outcome(read: Any, payload: bytes, flexible: bool) -> Any:
    try:
        return ("value", read(payload, flexible))
    except codec.MalformedRequest as e:
        return ("error", str(e))


@pytest.mark.parametrize("flexible", [False, True])
@pytest.mark.parametrize("client_id", [None, "", "rdkafka", "é" * 70])
def test_request_header_inline_matches_the_reader(flexible: bool, client_id: str | None) -> None:
    """The request header's inline plain case reads as the Reader does (the same header
    and body offset, or the same error) on every prefix and every forged byte."""
    header = codec.RequestHeader(0, 10, 99, client_id)
    tags = b"\x01\x05\x01x" if flexible else b""  # one tagged field: the Reader's path
    for payload in (codec.encode_request_header(header, flexible) + b"body",
                    codec.encode_request_header(header, False) + tags + b"body"):
        for end in range(len(payload) + 1):
            chunk = payload[:end]
            assert _header_outcome(codec.read_request_header, chunk, flexible) == \
                _header_outcome(codec._read_request_header, chunk, flexible), chunk
        for at in range(len(payload)):
            for forged in (b"\xff", b"\x80", b"\x00"):
                data = payload[:at] + forged + payload[at + 1:]
                assert _header_outcome(codec.read_request_header, data, flexible) == \
                    _header_outcome(codec._read_request_header, data, flexible), data


@pytest.mark.parametrize("count", [0, 1, 64, 65, 200])
def test_arrays_longer_than_the_preallocated_list(count: int) -> None:
    """Past the first 64 items an array's list grows by appends: the same value, and a
    count that lies is refused as before."""
    body = apis.MetadataRequest(topics=tuple(
        apis.MetadataRequestTopic(name=f"t{i}") for i in range(count)))
    for version in (4, 12):
        flexible = codec.is_flexible(apis.MetadataRequest, version)
        data = codec.encode_struct(body, version)
        assert codec.decode_struct(apis.MetadataRequest, data, version) == body
        for end in (len(data) - 1, len(data) // 2):
            assert repr(_outcome(apis.MetadataRequest, data[:end], version, flexible, False)) \
                == repr(_outcome(apis.MetadataRequest, data[:end], version, flexible, True))
