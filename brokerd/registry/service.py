# -*- test-case-name: tests.registry.test_http -*-
"""The Schema Registry over the broker's core: ``_schemas`` read into a
:class:`~brokerd.registry.store.RegistryState`, and every change written there first.

The first write creates ``_schemas`` (one partition, ``cleanup.policy=compact``; not at
start, so a broker whose registry is never used lists no topic it did not ask for). At
start the service replays the topic, when it exists, from its first record (without it
the registry is ready and empty, and looks for the topic every
:data:`TOPIC_POLL_SECONDS`), and then keeps tailing it
with the core's long poll, so that records someone else appends (a MirrorMaker 2
import, a registry pointed at the same topic) are applied like its own. Until the
replay has reached the high watermark seen at start the registry is not ready: reads
would answer from half a history, so the REST layer answers 503 (Confluent's 50002).

A write is Confluent's "write, then wait for the reader": the record is appended as one
uncompressed RecordBatch v2 through the core's produce (durable as any topic under the
broker's ``--fsync``), and the change is answered once the tail has applied that
offset, so an answer never promises what the state does not hold yet. Writes run one at
a time, so two registrations cannot draw the same id or version.

Schema texts are parsed by their format (:mod:`brokerd.registry.formats`, imported on
first use: an idle broker loads no Avro, JSON Schema or Protobuf code) and kept parsed
by id in a bounded LRU.
"""

from __future__ import annotations

import collections
import enum
import importlib
from collections.abc import Callable, Sequence
from typing import Any

from twisted.application import service
from twisted.internet import defer
from twisted.logger import Logger
from twisted.python.failure import Failure

from brokerd.clock import Clock
from brokerd.core.api import CoreApi
from brokerd.errors import (
    OffsetOutOfRange,
    ShuttingDown,
    TopicAlreadyExists,
    UnknownTopicOrPartition,
)
from brokerd.registry import compat
from brokerd.registry.model import (
    Compatibility,
    InvalidSchema,
    Mode,
    ParsedSchema,
    RegisteredSchema,
    RegistryError,
    Schema,
    SchemaFormat,
    SchemaReference,
    SchemaType,
)
from brokerd.registry.records import (
    ConfigRecord,
    DeleteSubject,
    ModeRecord,
    SchemaRecord,
    SchemaTombstone,
    StoreRecord,
    UnreadableRecord,
    decode_record,
    encode_record,
)
from brokerd.registry.store import RegistryState
from brokerd.storage.types import COMMITTED_RECORDS, LogRead

__all__ = [
    "MAX_PARSED",
    "SCHEMAS_TOPIC",
    "RegistryState",
    "SchemaRegistry",
    "State",
]

_log = Logger()

#: Confluent's topic (its ``kafkastore.topic`` default).
SCHEMAS_TOPIC = "_schemas"
#: Parsed schemas kept by id.
MAX_PARSED = 1000
#: Bytes of ``_schemas`` one read of the tail asks for.
READ_BYTES = 1024 * 1024
#: How long the tail parks before reading again anyway.
TAIL_WAIT_MS = 30_000
#: How long a write waits for the tail to apply it (Confluent's 50002 after).
WRITE_TIMEOUT_SECONDS = 30.0
#: How often a registry without ``_schemas`` looks for it (created by someone else).
TOPIC_POLL_SECONDS = 5.0
#: Pause before the tail reads again after a failed read.
RETRY_SECONDS = 1.0
#: Deepest chain of references followed.
MAX_REFERENCE_DEPTH = 32


class State(enum.Enum):
    STARTING = "starting"
    REPLAYING = "replaying"
    READY = "ready"
    STOPPED = "stopped"


def _load_formats() -> Callable[[SchemaType], SchemaFormat]:
    # Imported on first use, not with the broker: the formats load Avro, JSON Schema
    # and Protobuf libraries.
    module = importlib.import_module("brokerd.registry.formats")
    for_type: Callable[[SchemaType], SchemaFormat] = module.for_type
    return for_type


def _log_stop(failure: Failure) -> None:
    if not failure.check(defer.CancelledError):
        _log.failure("schema registry stopped reading _schemas", failure)


def not_found_subject(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def not_found_version(subject: str, version: object) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def not_permitted(message: str) -> RegistryError:
    return RegistryError(422, 42205, message)


class SchemaRegistry(service.Service):
    """The registry: the lookups the HTTP proxy, the console and produce validation ask
    (reactor thread; reads answer from memory) and the writes of the REST API.

    :param core: the broker's core.
    :param clock: the reactor's time.
    :param on_ready: called once, when the start-up replay is done.
    :param formats: the schema languages (default: :mod:`brokerd.registry.formats`,
        imported on first use).
    """

    def __init__(
        self,
        core: CoreApi,
        *,
        clock: Clock,
        on_ready: Callable[[], None] = lambda: None,
        formats: Callable[[SchemaType], SchemaFormat] | None = None,
        topic: str = SCHEMAS_TOPIC,
    ) -> None:
        self._core = core
        self._clock = clock
        self._on_ready = on_ready
        self._formats = formats
        self.topic = topic
        self.state = RegistryState()
        self.status = State.STARTING
        self._next_offset = 0
        self._ready_at = 0
        self._tail: defer.Deferred[Any] | None = None
        #: Fired when ``_schemas`` may have been created (the tail waits for it).
        self._appeared: defer.Deferred[None] | None = None
        self._waiters: list[tuple[int, defer.Deferred[None]]] = []
        self._write_lock = defer.DeferredLock()
        self._parsed: collections.OrderedDict[int, ParsedSchema] = collections.OrderedDict()
        #: Records of ``_schemas`` skipped as unreadable (shown in the log, counted here).
        self.unreadable = 0

    # -- the service -------------------------------------------------------------------

    def startService(self) -> None:
        super().startService()
        self._tail = defer.Deferred.fromCoroutine(self._run())
        self._tail.addErrback(_log_stop)

    def stopService(self) -> defer.Deferred[None] | None:
        self.status = State.STOPPED
        if self._tail is not None:
            self._tail.cancel()
            self._tail = None
        waiters, self._waiters = self._waiters, []
        for _offset, d in waiters:
            d.errback(RegistryError(503, 50003, "the schema registry is stopping"))
        return super().stopService()  # type: ignore[no-any-return]

    @property
    def ready(self) -> bool:
        return self.status is State.READY

    async def _run(self) -> None:
        while not self._stopped():
            await self._wait_for_topic()
            if self._stopped():
                return
            await self._tail_topic()

    def _stopped(self) -> bool:
        # A method, not an inline test: the status changes across awaits.
        return self.status is State.STOPPED

    async def _wait_for_topic(self) -> None:
        while self.topic not in self._core.topic_registry.topics():
            # Nothing to replay: ready, empty, until a write creates the topic (or
            # someone else does: a MirrorMaker 2 import).
            if self.status is State.STARTING:
                self.status = State.READY
                self._on_ready()
            self._appeared = defer.Deferred()
            timer = self._clock.callLater(TOPIC_POLL_SECONDS, self._topic_may_exist)
            try:
                await self._appeared
            finally:
                if timer.active():
                    timer.cancel()
            if self.status is State.STOPPED:
                return

    async def _tail_topic(self) -> None:
        """Replay the topic, then follow it; returns if it is deleted."""
        offsets = await self._core.reads.offsets(self.topic, 0)
        self._next_offset = offsets.log_start_offset
        self._ready_at = offsets.high_watermark
        if self.status is State.STARTING:
            # Once ready, the registry stays ready: a topic that appears later is
            # applied as it is read, as any record appended later is.
            self.status = State.REPLAYING
        self._check_ready()
        while self.status is not State.STOPPED:
            try:
                read = await self._read()
            except ShuttingDown:
                return
            except UnknownTopicOrPartition:
                # Someone deleted _schemas: what it said is gone with it.
                _log.warn("schema registry: {topic} was deleted; every schema is gone",
                          topic=self.topic)
                self.state = RegistryState()
                self._parsed.clear()
                return
            except OffsetOutOfRange as e:
                # Retention moved the log start past us (a misconfigured topic).
                self._next_offset = max(self._next_offset, e.log_start)
                continue
            except defer.CancelledError:
                raise
            except Exception:
                _log.failure("schema registry: reading {topic} failed", topic=self.topic)
                await self._sleep(RETRY_SECONDS)
                continue
            self._apply(read)
            if self._next_offset >= read.high_watermark or not read.decoded:
                await self._core.wait_for_data(
                    [(self.topic, 0, self._next_offset)], min_bytes=1,
                    max_wait_ms=TAIL_WAIT_MS,
                    seen={(self.topic, 0): read.high_watermark},
                )

    def _topic_may_exist(self) -> None:
        appeared, self._appeared = self._appeared, None
        if appeared is not None and not appeared.called:
            appeared.callback(None)

    async def _create_topic(self) -> None:
        """Create ``_schemas`` before the first write (1 partition, compacted)."""
        if self.topic in self._core.topic_registry.topics():
            return
        try:
            await self._core.create_topic(self.topic, 1, {"cleanup.policy": "compact"})
            _log.info("schema registry: created {topic}", topic=self.topic)
        except TopicAlreadyExists:
            pass
        self._topic_may_exist()

    def _sleep(self, seconds: float) -> defer.Deferred[None]:
        call = None
        d: defer.Deferred[None] = defer.Deferred(lambda _d: call and call.cancel())
        call = self._clock.callLater(seconds, d.callback, None)
        return d

    async def _read(self) -> LogRead:
        at = self._next_offset
        answer = self._core.reads.read(self.topic, 0, at, READ_BYTES, COMMITTED_RECORDS)
        return answer if isinstance(answer, LogRead) else await answer

    def _apply(self, read: LogRead) -> None:
        for record in read.decoded:
            if record.offset < self._next_offset:
                continue
            try:
                decoded = decode_record(record.key, record.value)
            except UnreadableRecord as e:
                self.unreadable += 1
                _log.warn("schema registry: {topic} offset {offset} skipped: {why}",
                          topic=self.topic, offset=record.offset, why=str(e))
                decoded = None
            if decoded is not None:
                self.state.apply(decoded, record.offset)
                if isinstance(decoded, SchemaRecord):
                    # A record may give an id another text (an import): parse it again.
                    self._parsed.pop(decoded.registered.schema_id, None)
            self._next_offset = record.offset + 1
        if not read.decoded and read.last_stable_offset > self._next_offset:
            # Only markers (or nothing committed) between us and the stable offset.
            self._next_offset = read.last_stable_offset
        self.state.applied_offset = self._next_offset - 1
        self._check_ready()
        self._fire_waiters()

    def _check_ready(self) -> None:
        if self.status is State.REPLAYING and self._next_offset >= self._ready_at:
            self.status = State.READY
            _log.info(
                "schema registry ready: {subjects} subject(s), {ids} schema id(s) from {topic}",
                subjects=len(self.state.subjects()), ids=len(list(self.state.ids())),
                topic=self.topic,
            )
            self._on_ready()

    def _fire_waiters(self) -> None:
        done = [w for w in self._waiters if w[0] < self._next_offset]
        if not done:
            return
        self._waiters = [w for w in self._waiters if w[0] >= self._next_offset]
        for _offset, d in done:
            if not d.called:
                d.callback(None)

    # -- writing -------------------------------------------------------------------------

    def check_ready(self) -> None:
        """Raise Confluent's 50002 while the start-up replay is not done."""
        if self.status is not State.READY:
            raise RegistryError(
                503, 50002, f"the schema registry is {self.status.value}: "
                f"{self.topic} not yet read to its end"
            )

    async def write(self, records: Sequence[StoreRecord]) -> None:
        """Append ``records`` (one batch) and wait until the state holds them."""
        from brokerd.storage.record.encode import encode_batch

        if self.status is State.STOPPED:
            raise RegistryError(503, 50003, "the schema registry is stopping")
        await self._create_topic()
        pairs = [encode_record(r) for r in records]
        batch = encode_batch(
            [v for _k, v in pairs], keys=[k for k, _v in pairs],
            timestamp_ms=int(self._clock.seconds() * 1000),
        )
        try:
            info = await self._core.produce_batches(self.topic, 0, batch)
        except Exception as e:
            raise RegistryError(500, 50001, f"error while writing to {self.topic}: {e}") from e
        if info.last_offset < self._next_offset:
            return
        applied: defer.Deferred[None] = defer.Deferred()
        self._waiters.append((info.last_offset, applied))

        def too_late() -> None:
            if not applied.called:
                self._waiters = [w for w in self._waiters if w[1] is not applied]
                applied.errback(RegistryError(
                    500, 50002, f"timed out waiting for {self.topic} to apply the write"
                ))

        timer = self._clock.callLater(WRITE_TIMEOUT_SECONDS, too_late)
        try:
            await applied
        finally:
            if timer.active():
                timer.cancel()

    async def _serialized(self, work: Callable[[], Any]) -> Any:
        await self._write_lock.acquire()
        try:
            self.check_ready()
            return await work()
        finally:
            self._write_lock.release()

    # -- parsing -------------------------------------------------------------------------

    def _format(self, schema_type: SchemaType) -> SchemaFormat:
        if self._formats is None:
            self._formats = _load_formats()
        return self._formats(schema_type)

    def resolve_references(self, references: Sequence[SchemaReference]) -> dict[str, str]:
        """Every name ``references`` import, transitively, with its text."""
        out: dict[str, str] = {}
        pending = [(r, 0) for r in references]
        while pending:
            ref, depth = pending.pop()
            if ref.name in out:
                continue
            if depth > MAX_REFERENCE_DEPTH:
                raise RegistryError(422, 42201, "Invalid schema: references nest too deep")
            found = self.state.version(ref.subject, ref.version)
            if found is None or found.deleted:
                raise RegistryError(
                    422, 42201,
                    f"Invalid schema: reference {ref.name!r} names {ref.subject!r} "
                    f"version {ref.version}, which does not exist",
                )
            out[ref.name] = found.schema.text
            pending.extend((r, depth + 1) for r in found.schema.references)
        return out

    def parse(self, schema: Schema) -> ParsedSchema:
        """``schema`` parsed; a text its format refuses is Confluent's 42201."""
        refs = self.resolve_references(schema.references)
        try:
            return self._format(schema.schema_type).parse(schema.text, refs)
        except InvalidSchema as e:
            raise RegistryError(
                422, 42201, f"Invalid schema {schema.text[:200]!r}: {e}"
            ) from None

    def parsed_by_id(self, schema_id: int) -> ParsedSchema | None:
        cached = self._parsed.get(schema_id)
        if cached is not None:
            self._parsed.move_to_end(schema_id)
            return cached
        schema = self.state.schema(schema_id)
        if schema is None:
            return None
        try:
            parsed = self.parse(schema)
        except RegistryError:
            return None
        self._parsed[schema_id] = parsed
        if len(self._parsed) > MAX_PARSED:
            self._parsed.popitem(last=False)
        return parsed

    # -- the lookups (the proxy, the console, produce validation) --------------------

    def schema_by_id(self, schema_id: int) -> Schema | None:
        return self.state.schema(schema_id)

    def subjects(self, *, deleted: bool = False) -> list[str]:
        return self.state.subjects(deleted=deleted)

    def versions(self, subject: str, *, deleted: bool = False) -> list[RegisteredSchema]:
        return self.state.versions(subject, deleted=deleted)

    def latest(self, subject: str) -> RegisteredSchema | None:
        return self.state.latest(subject)

    def subject_has_id(self, subject: str, schema_id: int) -> bool:
        return any(v.schema_id == schema_id for v in self.state.versions(subject))

    def compatibility_of(self, subject: str) -> Compatibility:
        return self.state.compatibility_of(subject)

    # -- registering and looking up ----------------------------------------------------

    def _stored_form(self, schema: Schema, parsed: ParsedSchema, normalize: bool) -> Schema:
        text = parsed.normalized() if normalize else parsed.canonical()
        return Schema(schema.schema_type, text, schema.references)

    def _same(self, stored: RegisteredSchema, candidate: Schema, parsed: ParsedSchema,
              normalize: bool) -> bool:
        s = stored.schema
        if s.schema_type is not candidate.schema_type or s.references != candidate.references:
            return False
        if s.text == candidate.text:
            return True
        other = self.parsed_by_id(stored.schema_id)
        if other is None:
            return False
        if normalize:
            return other.normalized() == parsed.normalized()
        return other.canonical() == parsed.canonical()

    def find(
        self, subject: str, schema: Schema, *, normalize: bool = False, deleted: bool = False
    ) -> RegisteredSchema:
        """``POST /subjects/{s}``: the version of ``subject`` holding ``schema``."""
        self.check_ready()
        if not self.state.versions(subject, deleted=True):
            raise not_found_subject(subject)
        parsed = self.parse(schema)
        candidate = self._stored_form(schema, parsed, normalize)
        for v in reversed(self.state.versions(subject, deleted=deleted)):
            if self._same(v, candidate, parsed, normalize):
                return v
        raise RegistryError(404, 40403, "Schema not found")

    def check_compatibility(
        self, subject: str, schema: Schema, version: int | None, *, normalize: bool = False
    ) -> list[str]:
        """The compatibility endpoint: why ``schema`` may not follow ``version`` (None:
        the versions the subject's level checks)."""
        self.check_ready()
        parsed = self.parse(schema)
        live = self.state.versions(subject)
        level = self.state.compatibility_of(subject)
        if version is not None:
            found = self.state.version(subject, version)
            if found is None or found.deleted:
                raise not_found_version(subject, version)
            old = self.parsed_by_id(found.schema_id)
            assert old is not None
            return compat.incompatibilities(
                _pairwise(level), parsed, [(found.version, old)]
            )
        return compat.incompatibilities(level, parsed, self._parsed_versions(live))

    def _parsed_versions(
        self, versions: Sequence[RegisteredSchema]
    ) -> list[tuple[int, ParsedSchema]]:
        out = []
        for v in versions:
            parsed = self.parsed_by_id(v.schema_id)
            if parsed is not None:
                out.append((v.version, parsed))
        return out

    def register(
        self, subject: str, schema: Schema, *, normalize: bool = False
    ) -> defer.Deferred[RegisteredSchema]:
        return defer.Deferred.fromCoroutine(self.register_as(subject, schema,
                                                             normalize=normalize))

    async def register_as(
        self,
        subject: str,
        schema: Schema,
        *,
        normalize: bool = False,
        schema_id: int | None = None,
        version: int | None = None,
    ) -> RegisteredSchema:
        """Register ``schema`` under ``subject`` (an IMPORT gives the id and version)."""
        async def work() -> RegisteredSchema:
            return await self._register(subject, schema, normalize, schema_id, version)

        result: RegisteredSchema = await self._serialized(work)
        return result

    async def _register(
        self,
        subject: str,
        schema: Schema,
        normalize: bool,
        schema_id: int | None,
        version: int | None,
    ) -> RegisteredSchema:
        mode = self.state.mode_of(subject)
        if mode is Mode.READONLY:
            raise not_permitted(f"Subject {subject} is in read-only mode")
        importing = mode is Mode.IMPORT
        parsed = self.parse(schema)
        stored = self._stored_form(schema, parsed, normalize)
        if schema_id is not None and not importing and self.state.schema(schema_id) not in (
            stored, schema
        ):
            # Outside IMPORT an id may only be given as the one the schema already has.
            raise not_permitted(
                f"Subject {subject} is not in import mode: it cannot take id {schema_id}"
            )
        live = self.state.versions(subject)
        for v in reversed(live):
            if self._same(v, stored, parsed, normalize) and (
                schema_id is None or schema_id == v.schema_id
            ):
                return v
        if importing:
            if schema_id is None:
                raise not_permitted("IMPORT mode registers schemas with their id given")
            held = self.state.schema(schema_id)
            if held is not None and held != stored and held != schema:
                raise RegistryError(
                    422, 42207, f"Overwrite new schema with id {schema_id} is not permitted."
                )
        else:
            messages = compat.incompatibilities(
                self.state.compatibility_of(subject), parsed, self._parsed_versions(live)
            )
            if messages:
                raise RegistryError(
                    409, 409,
                    "Schema being registered is incompatible with an earlier schema for "
                    f"subject \"{subject}\", details: [{', '.join(messages)}]",
                )
        if schema_id is None:
            schema_id = self.state.id_of(stored)
            if schema_id is None:
                schema_id = self.state.next_id
        if version is None or not importing:
            version = self.state.max_version(subject) + 1
        else:
            existing = self.state.version(subject, version)
            if existing is not None and not existing.deleted:
                raise not_permitted(f"Version {version} of subject {subject} exists")
        registered = RegisteredSchema(subject, version, schema_id, stored)
        self.state.note_id(schema_id)
        await self.write([SchemaRecord(registered)])
        return self.state.version(subject, version) or registered

    # -- deletes -----------------------------------------------------------------------

    def _check_writable(self, subject: str | None) -> None:
        if self.state.mode_of(subject) is Mode.READONLY:
            raise not_permitted(f"Subject {subject or '(global)'} is in read-only mode")

    async def delete_subject(self, subject: str, *, permanent: bool) -> list[int]:
        async def work() -> list[int]:
            self._check_writable(subject)
            every = self.state.versions(subject, deleted=True)
            if not every:
                raise not_found_subject(subject)
            live = [v for v in every if not v.deleted]
            if permanent:
                if live:
                    raise RegistryError(
                        404, 40405, f"Subject '{subject}' was not deleted first before "
                        "being permanently deleted"
                    )
                for v in every:
                    self._refuse_referenced(v)
                await self.write([SchemaTombstone(subject, v.version) for v in every])
                return [v.version for v in every]
            if not live:
                raise RegistryError(404, 40404, f"Subject '{subject}' was soft deleted.Set "
                                    "permanent=true to delete permanently")
            for v in live:
                self._refuse_referenced(v)
            await self.write([DeleteSubject(subject, live[-1].version)])
            return [v.version for v in live]

        result: list[int] = await self._serialized(work)
        return result

    def _refuse_referenced(self, v: RegisteredSchema) -> None:
        if self.state.referenced_by(v.subject, v.version):
            raise RegistryError(
                422, 42206, f"One or more references exist to the schema "
                f"{{subject={v.subject},version={v.version}}}."
            )

    def resolve_version(self, subject: str, version: str, *, deleted: bool = False
                        ) -> RegisteredSchema:
        """``{v|latest|-1}`` of a path: the version, or Confluent's 404s and 42202."""
        self.check_ready()
        if version in ("latest", "-1"):
            every = self.state.versions(subject, deleted=deleted)
            if not self.state.versions(subject, deleted=True):
                raise not_found_subject(subject)
            if not every:
                raise not_found_version(subject, version)
            return every[-1]
        number = parse_version(version)
        if not self.state.versions(subject, deleted=True):
            raise not_found_subject(subject)
        found = self.state.version(subject, number)
        if found is None or (found.deleted and not deleted):
            raise not_found_version(subject, number)
        return found

    async def delete_version(self, subject: str, version: str, *, permanent: bool) -> int:
        async def work() -> int:
            self._check_writable(subject)
            found = self.resolve_version(subject, version, deleted=True)
            if version in ("latest", "-1"):
                live = self.state.versions(subject)
                if not live and not permanent:
                    raise not_found_version(subject, version)
                if live:
                    found = live[-1]
            self._refuse_referenced(found)
            if permanent:
                if not found.deleted:
                    raise RegistryError(
                        404, 40407, f"Subject '{subject}' Version {found.version} was not "
                        "deleted first before being permanently deleted"
                    )
                await self.write([SchemaTombstone(subject, found.version)])
            else:
                if found.deleted:
                    raise RegistryError(
                        404, 40406, f"Subject '{subject}' Version {found.version} was soft "
                        "deleted.Set permanent=true to delete permanently"
                    )
                await self.write([SchemaRecord(RegisteredSchema(
                    found.subject, found.version, found.schema_id, found.schema, deleted=True
                ))])
            return found.version

        result: int = await self._serialized(work)
        return result

    # -- config and mode ---------------------------------------------------------------

    async def set_compatibility(self, subject: str | None, level: Compatibility | None) -> None:
        async def work() -> None:
            self._check_writable(subject)
            await self.write([ConfigRecord(subject, level)])

        await self._serialized(work)

    async def set_mode(self, subject: str | None, mode: Mode | None, *, force: bool) -> None:
        async def work() -> None:
            if mode is Mode.IMPORT and not force:
                has = self.state.versions(subject) if subject else self.state.subjects()
                if has:
                    raise not_permitted(
                        "Cannot import since found existing subjects"
                    )
            await self.write([ModeRecord(subject, mode)])

        await self._serialized(work)


def _pairwise(level: Compatibility) -> Compatibility:
    """A level applied to one given version: the transitive levels as their plain ones."""
    return {
        Compatibility.BACKWARD_TRANSITIVE: Compatibility.BACKWARD,
        Compatibility.FORWARD_TRANSITIVE: Compatibility.FORWARD,
        Compatibility.FULL_TRANSITIVE: Compatibility.FULL,
    }.get(level, level)


#: Largest version number (Confluent's are Java ints).
MAX_VERSION = 2**31 - 1


def parse_version(text: str) -> int:
    """A version of a path (1 to 2^31-1); anything else is Confluent's 42202."""
    try:
        number = int(text)
    except ValueError:
        number = 0
    if not text.isdigit() or not 1 <= number <= MAX_VERSION:
        raise RegistryError(
            422, 42202, f"The specified version '{text}' is not a valid version id. "
            "Allowed values are between [1, 2^31-1] and the string \"latest\""
        )
    return number
