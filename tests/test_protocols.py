"""No ``typing.Protocol`` in brokerd/ restates a single concrete class.

Every Protocol of the tree (found with ``ast``) is one of:

- a **shape** of two or more classes of brokerd/, :data:`SHAPES` naming them (each checked
  to define every member it declares, methods with as many positional parameters; test
  fakes do not count): a class that merely happens to have the members (every class with
  a ``name``) does not make a Protocol a shape, so a new one needs a reviewed entry;
- a function type (its one member is ``__call__``: functions and bound methods implement it);
- a **port**: a lower package declares what it needs of a higher one so that it need not
  import it (docs/architecture.md, "Which way the imports run"); :data:`PORTS` names the
  class that implements it, the declaring package must not import the implementing one,
  and the Protocol's docstring names its implementation;
- a typed view of a **library's object** (Twisted's reactor and transports, ``Popen``),
  :data:`OUTSIDE`, checked against that object;
- the core's face, :data:`FACES` (``CoreApi``: the roles of ``brokerd.core.roles`` joined,
  each core operation declared once; ``tests/core/test_api.py`` keeps it so).

A new Protocol with one implementation and no layer between it and its user fails here:
take the class instead (tests fake it by subclassing it or building it with fake parts).
"""

from __future__ import annotations

import ast
import enum
import functools
import importlib
import inspect
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from tests.test_layers import PACKAGE, module_name, node_of, package_graph, syntax_tree

#: Ports: the Protocol (declared by a lower package) -> the class of the higher package
#: that implements it.
PORTS: dict[str, str] = {
    # The core's roles sit below every part of the core (the share service is built on them,
    # and the broker imports the share service).
    "brokerd.core.roles.CoreTopics": "brokerd.core.topics.TopicRegistry",
    "brokerd.core.roles.HoldsTopics": "brokerd.core.broker.Broker",
    "brokerd.core.roles.CoreTopicChanges": "brokerd.core.broker.Broker",
    "brokerd.core.roles.CoreWrites": "brokerd.core.broker.Broker",
    "brokerd.core.roles.CoreLongPoll": "brokerd.core.broker.Broker",
    "brokerd.core.roles.CoreReads": "brokerd.core.fetcher.Fetcher",
    "brokerd.core.roles.CoreLogDir": "brokerd.core.services.LogDirectoryService",
    "brokerd.core.roles.CoreAppendWatches": "brokerd.core.waiters.WaiterRegistry",
    "brokerd.core.roles.CoreTransactions": "brokerd.core.txn_markers.TxnMarkers",
    # The core never imports the Kafka listener.
    "brokerd.core.roles.long_poll.AppendWatcher":
        "brokerd.kafka.server.handlers.fetch_watch.AppendsWatch",
    # The share service is a part the broker holds: it names what it uses of the broker.
    "brokerd.core.share.dead_letters.DeadLetterCore": "brokerd.core.broker.Broker",
    "brokerd.core.share.service.ShareCore": "brokerd.core.broker.Broker",
    # The Kafka listener's rooms: server/ below server/handlers/ below listener/.
    "brokerd.kafka.server.fetch_sessions.SessionWatch":
        "brokerd.kafka.server.handlers.fetch_watch.AppendsWatch",
    "brokerd.kafka.server.handler_base.BrokerIdentity":
        "brokerd.kafka.listener.protocol.KafkaFactory",
    # Nothing outside brokerd/kafka/ imports it but the wiring.
    "brokerd.metrics.collectors.FetchSessionCounters":
        "brokerd.kafka.server.fetch_sessions.FetchSessionCache",
    "brokerd.operator.group_face.DescribedGroupView":
        "brokerd.kafka.groups.group_admin.GroupDescription",
    "brokerd.operator.group_face.GroupAdminFace": "brokerd.kafka.groups.group_admin.GroupAdmin",
    "brokerd.operator.group_face.ShareMembersFace":
        "brokerd.kafka.groups.share.coordinator.ShareGroupCoordinator",
    "brokerd.operator.group_face.OperatorGroups":
        "brokerd.kafka.groups.coordinator.GroupCoordinator",
    "brokerd.operator.telemetry_face.PushedSeriesView": "brokerd.kafka.telemetry.clients.Series",
    "brokerd.operator.telemetry_face.TelemetryClientView":
        "brokerd.kafka.telemetry.clients.ClientView",
    "brokerd.operator.telemetry_face.TelemetryFace":
        "brokerd.kafka.telemetry.clients.ClientTelemetry",
    "brokerd.operator.txn_face.ListedTxnView": "brokerd.kafka.txn.types.TxnListing",
    "brokerd.operator.txn_face.TxnListingFace":
        "brokerd.kafka.txn.coordinator.TransactionCoordinator",
    "brokerd.proxy.group_face.ProxyGroups": "brokerd.kafka.groups.proxy_members.ProxyMembers",
    # Storage's rooms, lowest first: the floor and record/ below segment/ and log/.
    "brokerd.storage.types.FileRegion": "brokerd.storage.segment.stored.StoredSpan",
    "brokerd.storage.record.decode.SkipBatches": "brokerd.storage.log.txns.CommittedFilter",
    # The registry's REST listener imports the web package's authentication.
    "brokerd.web.schema_face.Named": "brokerd.registry.model.SchemaType",
    "brokerd.web.schema_face.Reference": "brokerd.registry.model.SchemaReference",
    "brokerd.web.schema_face.SchemaText": "brokerd.registry.model.Schema",
    "brokerd.web.schema_face.SchemaVersion": "brokerd.registry.model.RegisteredSchema",
    "brokerd.web.schema_face.SchemaSource": "brokerd.registry.service.SchemaRegistry",
}

#: Shapes: the Protocol -> the classes of brokerd/ it is declared for (two or more).
SHAPES: dict[str, tuple[str, ...]] = {
    # The core's parts.
    "brokerd.core.roles.HoldsReads": (
        "brokerd.core.broker.Broker", "brokerd.web.data_face.BrokerData",
    ),
    "brokerd.core.stopping.Latched": (
        "brokerd.core.broker.Broker", "brokerd.core.txn_markers.TxnMarkers",
    ),
    # The KIP-848 groups: consumer and streams groups share one runtime.
    "brokerd.kafka.groups.coordinator._Kip848Group": (
        "brokerd.kafka.groups.consumer.state.ConsumerGroup",
        "brokerd.kafka.groups.streams.state.StreamsGroup",
    ),
    "brokerd.kafka.groups.kip848.members.Group": (
        "brokerd.kafka.groups.consumer.state.ConsumerGroup",
        "brokerd.kafka.groups.streams.state.StreamsGroup",
    ),
    "brokerd.kafka.groups.kip848.members.StaticGroup": (
        "brokerd.kafka.groups.consumer.state.ConsumerGroup",
        "brokerd.kafka.groups.streams.state.StreamsGroup",
    ),
    "brokerd.kafka.groups.kip848.members.DeletableGroup": (
        "brokerd.kafka.groups.consumer.state.ConsumerGroup",
        "brokerd.kafka.groups.streams.state.StreamsGroup",
    ),
    "brokerd.kafka.groups.kip848.members.Member": (
        "brokerd.kafka.groups.consumer.state.ConsumerMember",
        "brokerd.kafka.groups.streams.state.StreamsMember",
    ),
    "brokerd.kafka.groups.kip848.members.TimedMember": (
        "brokerd.kafka.groups.consumer.state.ConsumerMember",
        "brokerd.kafka.groups.streams.state.StreamsMember",
    ),
    "brokerd.kafka.groups.kip848.members.FieldsMember": (
        "brokerd.kafka.groups.consumer.state.ConsumerMember",
        "brokerd.kafka.groups.streams.state.StreamsMember",
    ),
    "brokerd.kafka.groups.kip848.records.StoredMember": (
        "brokerd.kafka.groups.consumer.state.ConsumerMember",
        "brokerd.kafka.groups.streams.state.StreamsMember",
    ),
    "brokerd.kafka.groups.kip848.members.HeartbeatFields": (
        "brokerd.kafka.groups.consumer.coordinator.HeartbeatInput",
        "brokerd.kafka.groups.streams.coordinator.HeartbeatInput",
    ),
    # Kafka messages one ACL rule reads alike.
    "brokerd.kafka.server.acl_gate.GroupIdsBody": (
        "brokerd.kafka.wire.messages.consumer_groups.ConsumerGroupDescribeRequest",
        "brokerd.kafka.wire.messages.share.ShareGroupDescribeRequest",
        "brokerd.kafka.wire.messages.streams_groups.StreamsGroupDescribeRequest",
    ),
    "brokerd.kafka.server.acl_gate.GroupsBody": (
        "brokerd.kafka.wire.messages.consumer_groups.ConsumerGroupDescribeResponse",
        "brokerd.kafka.wire.messages.share.ShareGroupDescribeResponse",
        "brokerd.kafka.wire.messages.streams_groups.StreamsGroupDescribeResponse",
    ),
    "brokerd.kafka.server.acl_gate.Named": (
        "brokerd.kafka.wire.messages.topics.CreatableTopic",
        "brokerd.kafka.wire.messages.partitions.CreatePartitionsTopic",
        "brokerd.kafka.wire.messages.partitions.DeleteRecordsTopic",
        "brokerd.kafka.wire.messages.list_offsets.ListOffsetsTopic",
        "brokerd.kafka.wire.messages.produce.ProduceTopicData",
        "brokerd.kafka.wire.messages.group_admin.OffsetDeleteRequestTopic",
        "brokerd.kafka.wire.messages.txn.AddPartitionsToTxnTopic",
        "brokerd.kafka.wire.messages.txn.TxnOffsetCommitRequestTopic",
    ),
    "brokerd.kafka.server.handlers.groups._NamesGroup": (
        "brokerd.kafka.wire.messages.groups.JoinGroupRequest",
        "brokerd.kafka.wire.messages.groups.SyncGroupRequest",
        "brokerd.kafka.wire.messages.groups.HeartbeatRequest",
        "brokerd.kafka.wire.messages.groups.LeaveGroupRequest",
    ),
    "brokerd.kafka.server.handlers.groups._NamedTopic": (
        "brokerd.kafka.wire.messages.groups.OffsetCommitTopic",
        "brokerd.kafka.wire.messages.groups.OffsetFetchTopic",
    ),
    "brokerd.kafka.wire.codec.WireType": (
        "brokerd.kafka.wire.codec.Array",
        "brokerd.kafka.wire.codec.Struct",
        "brokerd.kafka.wire.codec._Fixed",
        "brokerd.kafka.wire.codec._Sized",
        "brokerd.kafka.wire.messages.topic_partitions.NullableStruct",
    ),
    # The two request protocols on one connection.
    "brokerd.net.connection.Dispatcher": (
        "brokerd.kafka.listener.protocol.KafkaDispatcher",
        "brokerd.native.protocol.NativeDispatcher",
    ),
    "brokerd.net.decoding.RequestDecoder": (
        "brokerd.kafka.listener.request_decoder.KafkaDecoder",
        "brokerd.native.request_decoder.NativeDecoder",
    ),
    # The metrics, or nothing.
    "brokerd.observers.RequestObserver": (
        "brokerd.metrics.live.ListenerMetrics", "brokerd.observers.NullRequestObserver",
    ),
    "brokerd.observers.WriteObserver": (
        "brokerd.metrics.live.WriteMetrics", "brokerd.observers.NullWriteObserver",
    ),
    "brokerd.operator.group_face.DescribedMemberView": (
        "brokerd.kafka.groups.group_admin.DescribedMember",
        "brokerd.kafka.groups.share.coordinator.Member",
    ),
    # The schema formats.
    "brokerd.registry.model.ParsedSchema": (
        "brokerd.registry.formats.avro.ParsedAvro",
        "brokerd.registry.formats.json_schema.ParsedJsonSchema",
        "brokerd.registry.formats.protobuf.ParsedProtobuf",
    ),
    "brokerd.registry.model.SchemaFormat": (
        "brokerd.registry.formats.avro.AvroFormat",
        "brokerd.registry.formats.json_schema.JsonSchemaFormat",
        "brokerd.registry.formats.protobuf.ProtobufFormat",
    ),
    "brokerd.web.schema_face.Serializer": (
        "brokerd.registry.formats.avro.ParsedAvro",
        "brokerd.registry.formats.json_schema.ParsedJsonSchema",
        "brokerd.registry.formats.protobuf.ParsedProtobuf",
    ),
    # The journal stores.
    "brokerd.storage.journal.engine.JournalState": (
        "brokerd.storage.stores.offsets._OffsetsView",
        "brokerd.storage.stores.producer_ids._Mark",
        "brokerd.storage.stores.share_state._View",
        "brokerd.storage.stores.txn_log._TxnView",
    ),
    "brokerd.storage.journal.engine.JournalStore": (
        "brokerd.storage.stores.offsets.OffsetStore",
        "brokerd.storage.stores.producer_ids.ProducerIdAllocator",
        "brokerd.storage.stores.share_state.ShareStateStore",
        "brokerd.storage.stores.txn_log.TxnLog",
    ),
    # The console's actions, and its source whole or as one principal sees it.
    "brokerd.web.actions.Right": (
        "brokerd.web.actions.CreateTopic",
        "brokerd.web.actions.ResetOffsets",
        "brokerd.web.actions.TopicRight",
    ),
    "brokerd.web.actions.Action": (
        "brokerd.web.actions.CreateTopic",
        "brokerd.web.actions.DeleteTopic",
        "brokerd.web.actions.EditConfigs",
        "brokerd.web.actions.Produce",
        "brokerd.web.actions.ResetOffsets",
    ),
    "brokerd.web.console_history.ConsoleSource": (
        "brokerd.operator.inspect.Inspector", "brokerd.web.scope.ScopedSource",
    ),
}

#: Typed views of a library's objects: the Protocol -> the class it describes (and the
#: members that class sets on its instances, which the class itself does not show).
OUTSIDE: dict[str, tuple[str, frozenset[str]]] = {
    "brokerd.clock.DelayedCall": ("twisted.internet.base.DelayedCall", frozenset()),
    "brokerd.clock.Seconds": ("twisted.internet.task.Clock", frozenset()),
    "brokerd.clock.Clock": ("twisted.internet.task.Clock", frozenset()),
    "brokerd.core.interfaces.ThreadReactor": ("twisted.internet.base.ReactorBase", frozenset()),
    "brokerd.core.interfaces.CoreReactor": ("twisted.internet.base.ReactorBase", frozenset()),
    "brokerd.sdnotify._RunningReactor": ("twisted.internet.base.ReactorBase", frozenset()),
    "brokerd.net.transport.Transport": ("twisted.internet.tcp.Connection", frozenset()),
    "brokerd.net.sendfile.SpliceTransport": (
        "twisted.internet.tcp.Connection", frozenset({"socket"})
    ),
    "brokerd.net.chunked.ChunkTransport": ("twisted.internet.tcp.Connection", frozenset()),
    # Also brokerd.testing.launcher.ForkedChild.
    "brokerd.testing.launcher.Child": ("subprocess.Popen", frozenset({"pid", "returncode"})),
}

#: Protocols whose implementations get their members at import time (not in the source).
BUILT: dict[str, str] = {
    # schema.py's message decorator sets each message class's FIELDS.
    "brokerd.kafka.wire.codec.Message": "brokerd.kafka.wire.messages",
}

#: The core's face (see the module docstring) -> its implementation.
FACES: dict[str, str] = {"brokerd.core.api.CoreApi": "brokerd.core.broker.Broker"}

_SKIPPED_DUNDERS = {"__init__", "__new__", "__repr__", "__str__", "__eq__", "__hash__"}


@attrs.frozen
class Declared:
    """One class of brokerd/ as its source declares it."""

    qualname: str
    node: ast.ClassDef
    is_protocol: bool
    bases: tuple[str, ...]  # the bases' last names, Protocol and Generic left out

    @functools.cached_property
    def members(self) -> dict[str, int | None]:
        """Name -> positional parameter count after self (None: an attribute or property,
        or a method taking ``*args``). Read when a test asks, not at collection."""
        return _members(self.node)


def _module_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """A module's statements, those under a module-level ``if`` (``TYPE_CHECKING``) too."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.If):
            yield from _module_level(stmt.body)
            yield from _module_level(stmt.orelse)


def _typing_protocol_names(tree: ast.Module) -> set[str]:
    return {
        alias.asname or alias.name
        for node in _module_level(tree.body)
        if isinstance(node, ast.ImportFrom) and node.module in ("typing", "typing_extensions")
        for alias in node.names
        if alias.name == "Protocol"
    }


def _arity(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int | None:
    if any(isinstance(d, ast.Name) and d.id == "property" for d in fn.decorator_list):
        return None
    if fn.args.vararg is not None:
        return None
    count = len(fn.args.posonlyargs) + len(fn.args.args)
    static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list)
    return count if static else count - 1


def _members(node: ast.ClassDef) -> dict[str, int | None]:
    found: dict[str, int | None] = {}
    for stmt in node.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if stmt.name not in _SKIPPED_DUNDERS:
                found.setdefault(stmt.name, _arity(stmt))
            for sub in ast.walk(stmt):
                if (
                    isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store)
                    and isinstance(sub.value, ast.Name) and sub.value.id == "self"
                ):
                    found.setdefault(sub.attr, None)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            found.setdefault(stmt.target.id, None)
        elif isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    found.setdefault(target.id, None)
    return found


def _classes(body: list[ast.stmt]) -> Iterator[ast.ClassDef]:
    """The classes a module body declares, nested ones and those under ``if`` and ``try``
    included; function bodies are not searched (no Protocol is declared in one), which
    keeps collection from walking every statement of the tree."""
    for stmt in body:
        if isinstance(stmt, ast.ClassDef):
            yield stmt
            yield from _classes(stmt.body)
        elif isinstance(stmt, (ast.If, ast.Try)):
            yield from _classes(stmt.body)
            yield from _classes(stmt.orelse)
            if isinstance(stmt, ast.Try):
                for handler in stmt.handlers:
                    yield from _classes(handler.body)
                yield from _classes(stmt.finalbody)


@functools.cache
def declared() -> dict[str, Declared]:
    """Every class of brokerd/, by ``module.Class``."""
    found: dict[str, Declared] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = syntax_tree(path)
        protocol_names = _typing_protocol_names(tree)
        module = module_name(path)
        for node in _classes(tree.body):
            is_protocol, bases = False, []
            for base in node.bases:
                text = ast.unparse(base.value if isinstance(base, ast.Subscript) else base)
                if text in protocol_names or text == "typing.Protocol":
                    is_protocol = True
                elif text != "Generic":
                    bases.append(text.rsplit(".", 1)[-1])
            qualname = f"{module}.{node.name}"
            found[qualname] = Declared(qualname, node, is_protocol, tuple(bases))
    return found


@functools.cache
def _by_name() -> dict[str, list[Declared]]:
    named: dict[str, list[Declared]] = {}
    for cls in declared().values():
        named.setdefault(cls.node.name, []).append(cls)
    return named


def all_members(cls: Declared, seen: frozenset[str] = frozenset()) -> dict[str, int | None]:
    """A class's members with those of its bases declared in brokerd/ (a base of the same
    name in several modules counts once: the first)."""
    members: dict[str, int | None] = {}
    for base in cls.bases:
        found = _by_name().get(base)
        if found and found[0].qualname not in seen:
            members.update(all_members(found[0], seen | {cls.qualname}))
    members.update(cls.members)
    return members


def protocols() -> list[Declared]:
    return [cls for cls in declared().values() if cls.is_protocol]


def implements(cls: Declared, protocol: Declared) -> bool:
    have, need = all_members(cls), all_members(protocol)
    return bool(need) and all(
        name in have and (arity is None or have[name] is None or have[name] == arity)
        for name, arity in need.items()
    )


def implementations(protocol: Declared) -> list[str]:
    return sorted(
        cls.qualname for cls in declared().values()
        if not cls.is_protocol and implements(cls, protocol)
    )


def _import(dotted: str) -> object:
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _package(qualname: str) -> str:
    module = qualname.rpartition(".")[0]
    path = PACKAGE.parent.joinpath(*module.split("."))
    if path.with_suffix(".py").parent == PACKAGE:
        return module  # a module directly in brokerd/ is its own node
    node = node_of(module)
    assert node is not None, qualname
    return node


def _reaches(graph: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = set(), [start]
    while todo:
        node = todo.pop()
        if node == goal:
            return True
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return False


def verdict(protocol: Declared) -> str:
    """Why ``protocol`` is not a restatement, or ``"restates"``."""
    name = protocol.qualname
    for table, why in ((PORTS, "port"), (SHAPES, "shape"), (OUTSIDE, "outside"),
                       (BUILT, "built"), (FACES, "face")):
        if name in table:
            return why
    if set(all_members(protocol)) == {"__call__"}:
        return "function type"
    return "restates"


# -- the tests --------------------------------------------------------------------------


def test_the_finder_sees_the_protocols() -> None:
    names = {cls.qualname for cls in protocols()}
    assert "brokerd.core.api.CoreApi" in names
    assert "brokerd.net.decoding.RequestDecoder" in names  # Protocol[T]
    # Twisted's Protocol is a class, not a typing Protocol.
    assert "brokerd.net.connection.RequestConnection" not in names
    assert len(names) > 40


def test_the_shape_check_sees_two_implementations() -> None:
    decoder = declared()["brokerd.net.decoding.RequestDecoder"]
    assert implementations(decoder) == [
        "brokerd.kafka.listener.request_decoder.KafkaDecoder",
        "brokerd.native.request_decoder.NativeDecoder",
    ]


def test_a_restatement_is_caught() -> None:
    # What core/services.py once declared of the log directory: one implementation, in a
    # package the core may import.
    node = ast.parse(
        "class RecoveredSync(Protocol):\n"
        "    def unsynced_partitions(self) -> int: ...\n"
        "    def sync_recovered(self) -> bool: ...\n"
    ).body[0]
    assert isinstance(node, ast.ClassDef)
    restated = Declared("brokerd.core.services.RecoveredSync", node, True, ())
    assert implementations(restated) == ["brokerd.storage.logdir.log_directory.LogDirectory"]
    assert verdict(restated) == "restates"


@pytest.mark.parametrize("protocol", protocols(), ids=lambda p: p.qualname)
def test_no_protocol_restates_one_class(protocol: Declared) -> None:
    found = implementations(protocol)
    assert verdict(protocol) != "restates", (
        f"{protocol.qualname} has {len(found)} implementation(s) in brokerd/ {found} and "
        "is not a port: take the class instead, list it in PORTS with the lower "
        "package that declares it and the class that implements it, or in SHAPES with "
        "the two or more classes it is declared for"
    )


def test_every_table_entry_is_a_protocol_of_the_tree() -> None:
    names = {cls.qualname for cls in protocols()}
    for table in (PORTS, SHAPES, OUTSIDE, BUILT, FACES):
        assert set(table) <= names, sorted(set(table) - names)


@pytest.mark.parametrize("port", sorted(PORTS))
def test_a_port_is_declared_below_its_implementation(port: str) -> None:
    implementation = PORTS[port]
    protocol, cls = declared()[port], declared()[implementation]
    # The class implements it (structurally, as mypy checks where it is passed).
    assert implements(cls, protocol) or _has_members(implementation, set(all_members(protocol))), (
        f"{implementation} does not implement {port}"
    )
    # The declaring package does not import the implementing one: the reason for the port.
    lower, higher = _package(port), _package(implementation)
    assert lower != higher, f"{port} and {implementation} are in one package: take the class"
    assert not _reaches(package_graph(), lower, higher), (
        f"{lower} imports {higher}: {port} restates {implementation}; take the class"
    )
    # The docstring says who implements it.
    doc = ast.get_docstring(protocol.node) or ""
    assert cls.node.name in " ".join(doc.split()), (
        f"{port}'s docstring does not name its implementation {cls.node.name}"
    )


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_shape_has_the_classes_it_names(shape: str) -> None:
    classes = SHAPES[shape]
    assert len(set(classes)) >= 2, f"{shape} names one class: take the class instead"
    protocol = declared()[shape]
    need = set(all_members(protocol))
    for dotted in classes:
        assert implements(declared()[dotted], protocol) or _has_members(dotted, need), (
            f"{dotted} does not implement {shape}"
        )


def _missing(dotted: str, names: set[str]) -> set[str]:
    """Those of ``names`` the class ``dotted`` (imported) has neither as an attribute nor
    as an attrs field."""
    cls = _import(dotted)
    assert inspect.isclass(cls)
    fields = {field.name for field in attrs.fields(cls)} if attrs.has(cls) else set()
    # An enum's members have ``value`` and ``name``; its class does not.
    obj = next(iter(cls)) if issubclass(cls, enum.Enum) else cls
    return {name for name in names if not hasattr(obj, name) and name not in fields}


def _has_members(dotted: str, names: set[str]) -> bool:
    return not _missing(dotted, names)


@pytest.mark.parametrize("view", sorted(OUTSIDE))
def test_an_outside_view_matches_the_library_object(view: str) -> None:
    target, on_instances = OUTSIDE[view]
    need = set(all_members(declared()[view]))
    missing = _missing(target, need) - on_instances
    assert not missing, f"{target} has no {sorted(missing)} ({view})"


def test_built_members_are_there() -> None:
    for name, package in BUILT.items():
        need = set(all_members(declared()[name]))
        root = importlib.import_module(package)
        classes = []
        for path in Path(root.__file__ or "").parent.glob("*.py"):
            module = importlib.import_module(f"{package}.{path.stem}")
            classes += [obj for obj in vars(module).values()
                        if inspect.isclass(obj) and need <= set(dir(obj))]
        assert len(classes) >= 2, name


def test_the_face_is_implemented_by_its_class() -> None:
    for face, implementation in FACES.items():
        assert implements(declared()[implementation], declared()[face])
