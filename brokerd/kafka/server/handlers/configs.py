# -*- test-case-name: tests.kafka.server.handlers.test_configs -*-
"""Kafka's config APIs: DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.

Two kinds of resource exist, as in Kafka: a topic (resource type 2), whose configs are
the names of :mod:`brokerd.storage.config.topic_config` with the topic's overrides over the
broker-wide defaults, and the broker (type 4, named by its node id, ``"0"``), whose
configs are those defaults under Kafka's broker-level names plus ``broker.id``,
``num.partitions`` and ``auto.create.topics.enable``. Each described value says where it
comes from as Kafka does (``config_source``: DYNAMIC_TOPIC_CONFIG for a topic override,
STATIC_BROKER_CONFIG for a value set on the command line that differs from brokerd's
built-in default, DEFAULT_CONFIG otherwise), with the synonyms that explain it (v1+): a
topic's ``retention.ms`` lists its override, then ``log.retention.ms`` as the broker has
it, then the built-in default. The built-in defaults (:data:`BUILTIN_DEFAULTS`) are
Kafka's, but for ``flush.messages``: brokerd's default ``--fsync always`` syncs every
append before answering it, which is ``flush.messages=1``. That is described as it is
(the effective value, DEFAULT_CONFIG): a topic's durability comes from the broker-level
setting, which nobody changed, and a Kafka tool showing "1, static broker config" on
every topic would suggest an override that no operator made.

A group (type 32, named by its group id) has the group configs of
:mod:`brokerd.kafka.groups.group_configs` (``consumer.session.timeout.ms``,
``consumer.heartbeat.interval.ms``, whose broker synonyms are ``group.consumer.*``) and
the share groups' ``share.*`` (``share_configs.py``): a group's override is GROUP_CONFIG,
else the broker's value; IncrementalAlterConfigs sets or deletes them, checked against the
broker's bounds as Kafka checks them (AlterConfigs does not take groups, as in Kafka).

A client-metrics resource (type 16, KIP-714: :mod:`brokerd.kafka.telemetry.resources`)
describes the configs set on it (CLIENT_METRICS_CONFIG; a name never set has none);
IncrementalAlterConfigs sets, deletes, appends to or subtracts from them (a resource whose
last config is deleted is gone). Its access checks are the cluster's, as in Kafka.

AlterConfigs replaces a topic's whole set of overrides (Kafka's legacy semantics);
IncrementalAlterConfigs sets, deletes, appends to or subtracts from single configs. Both
honour ``validate_only``. Broker configs are read-only in brokerd (they come from the
command line): altering one is refused with INVALID_CONFIG. Every resource gets its own
error code and a message naming the offending key.

It does not validate values itself (``topic_config`` does), store anything (the core's
``alter_topic_configs`` does, durably) or parse bytes (:mod:`brokerd.kafka.wire.requests.apis`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

import attrs
from twisted.logger import Logger

from brokerd.core.api import CoreApi
from brokerd.core.policy import DEFAULT_FSYNC
from brokerd.core.share.config import is_group_config
from brokerd.errors import InvalidConfig, InvalidTopic
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.groups.group_configs import (
    GROUP_CONFIG_TABLE,
    GroupConfigs,
    InvalidGroupConfig,
)
from brokerd.kafka.server.acl_gate import (
    CLUSTER_DENIED,
    DENIED_TEXT,
    GROUP_DENIED,
    TOPIC_DENIED,
    Access,
    Gate,
    split_entries,
)
from brokerd.kafka.server.handler_base import (
    BrokerIdentity,
    RequestContext,
    message,
    unexpected_code,
)
from brokerd.kafka.server.handlers.share_configs import GroupConfigRefused, ShareGroupConfigs
from brokerd.kafka.server.route import AnyRoute, route
from brokerd.kafka.telemetry.resources import (
    CONFIGS as CLIENT_METRICS_CONFIGS,
)
from brokerd.kafka.telemetry.resources import (
    ClientMetricsResources,
    InvalidClientMetricsConfig,
)
from brokerd.kafka.wire.messages.configs import (
    ALTER_CONFIGS,
    DESCRIBE_CONFIGS,
    INCREMENTAL_ALTER_CONFIGS,
    IncrementalAlterConfigsResponse,
)
from brokerd.kafka.wire.requests import apis
from brokerd.kafka.wire.requests.apis import Request
from brokerd.names import validate_topic_name
from brokerd.security.acl import Operation
from brokerd.storage.config.topic_config import (
    TOPIC_CONFIGS,
    AlterOp,
    ConfigType,
    apply_incremental,
)
from brokerd.storage.types import TopicInfo

if TYPE_CHECKING:
    from brokerd.kafka.groups.coordinator import GroupCoordinator

#: Group configs of share groups (Kafka's ``share.*`` group configs).
SHARE_PREFIX = "share."

__all__ = ["ConfigHandlers", "ConfigSource", "ResourceType"]


class ResourceType(enum.IntEnum):
    """Kafka's config resource types brokerd answers for."""

    TOPIC = 2
    BROKER = 4
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigSource(enum.IntEnum):
    """Kafka's ``ConfigSource`` numbers (DescribeConfigs v1+)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


#: The value of each topic config (and of its broker synonym) when the operator sets
#: nothing: Kafka's default, but for what brokerd's default ``--fsync`` amounts to.
BUILTIN_DEFAULTS: Mapping[str, str] = {
    **{name: definition.default for name, definition in TOPIC_CONFIGS.items()},
    **DEFAULT_FSYNC.flush_defaults(),
}

#: Kafka's defaults of the broker configs brokerd describes besides the topic defaults.
KAFKA_BROKER_ID_DEFAULT = "-1"
KAFKA_NUM_PARTITIONS_DEFAULT = "1"
KAFKA_AUTO_CREATE_DEFAULT = "true"
KAFKA_TELEMETRY_MAX_BYTES_DEFAULT = 1024 * 1024


#: Resource types whose configs are kept outside the topic store (groups' by the group
#: coordinator and the share state, client metrics' in their own file).
_OWN_STORES = (ResourceType.GROUP, ResourceType.CLIENT_METRICS)


#: A resource of AlterConfigs or of IncrementalAlterConfigs (one code path alters both).
AlterResource = TypeVar(
    "AlterResource", apis.AlterConfigsResource, apis.IncrementalAlterConfigsResource
)


class _Refused(Exception):
    """A resource answered with an error code and message."""

    def __init__(self, code: ErrorCode, text: str) -> None:
        super().__init__(text)
        self.code = code
        self.text = text


def _refuse_duplicate_keys(res: apis.IncrementalAlterConfigsResource) -> None:
    """IncrementalAlterConfigs names each config of a resource once (Kafka's rule)."""
    names = [c.name for c in res.configs]
    if len(set(names)) != len(names):
        raise _Refused(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")


def _entry(
    name: str,
    value: str,
    source: ConfigSource,
    synonyms: Sequence[tuple[str, str, ConfigSource]],
    *,
    read_only: bool,
    config_type: ConfigType,
    doc: str | None,
) -> apis.DescribeConfigsResourceResult:
    return apis.DescribeConfigsResourceResult(
        name=name,
        value=value,
        read_only=read_only,
        config_source=source,
        is_sensitive=False,
        synonyms=tuple(
            apis.DescribeConfigsSynonym(name=n, value=v, source=s) for n, v, s in synonyms
        ),
        config_type=config_type,
        documentation=doc,
    )


DEFAULT = ConfigSource.DEFAULT_CONFIG


def _broker_synonyms(
    broker_name: str, value: str, default: str
) -> list[tuple[str, str, ConfigSource]]:
    """The broker-level synonyms of a value, most specific first (Kafka's order):
    ``default`` is the value when the operator sets nothing."""
    out = []
    if value != default:
        out.append((broker_name, value, ConfigSource.STATIC_BROKER_CONFIG))
    out.append((broker_name, default, ConfigSource.DEFAULT_CONFIG))
    return out


def topic_entries(
    info: TopicInfo,
    defaults: Mapping[str, str],
    keys: Sequence[str] | None,
    *,
    synonyms: bool,
    documentation: bool,
) -> list[apis.DescribeConfigsResourceResult]:
    """Every (or every wanted) config of a topic, as DescribeConfigs describes it."""
    out = []
    for name, definition in TOPIC_CONFIGS.items():
        if keys is not None and name not in keys:
            continue
        chain: list[tuple[str, str, ConfigSource]] = []
        if definition.broker_name is not None:
            chain = _broker_synonyms(definition.broker_name, defaults[name], BUILTIN_DEFAULTS[name])
        override = info.configs.get(name)
        if override is not None:
            chain.insert(0, (name, override, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        value, source = chain[0][1:] if chain else (definition.default, DEFAULT)
        out.append(
            _entry(
                name,
                value,
                source,
                chain if synonyms else (),
                read_only=False,
                config_type=definition.type,
                doc=definition.documentation if documentation else None,
            )
        )
    return out


def group_entries(
    configs: GroupConfigs,
    group_id: str,
    keys: Sequence[str] | None,
    *,
    synonyms: bool,
    documentation: bool,
) -> list[apis.DescribeConfigsResourceResult]:
    """A group's configs: its override (GROUP_CONFIG), else the broker's value."""
    out = []
    for c in configs.describe(group_id, keys):
        chain = _broker_synonyms(
            GROUP_CONFIG_TABLE[c.name].broker_name, c.broker_value, c.kafka_default
        )
        if c.overridden:
            chain.insert(0, (c.name, c.value, ConfigSource.GROUP_CONFIG))
        out.append(_entry(
            c.name, c.value, chain[0][2], chain if synonyms else (),
            read_only=False, config_type=ConfigType.INT,
            doc=c.doc if documentation else None,
        ))
    return out


def broker_entries(
    defaults: Mapping[str, str],
    extra: Sequence[tuple[str, str, str, ConfigType, str]],
    keys: Sequence[str] | None,
    *,
    synonyms: bool,
    documentation: bool,
) -> list[apis.DescribeConfigsResourceResult]:
    """The broker's configs: the topic defaults under their broker names, then
    ``extra`` (name, value, Kafka's default, type, doc). All read-only."""
    rows = [
        (d.broker_name, defaults[name], BUILTIN_DEFAULTS[name], d.type, d.documentation)
        for name, d in TOPIC_CONFIGS.items()
        if d.broker_name is not None
    ]
    rows.extend(extra)
    out = []
    for name, value, kafka_default, config_type, doc in rows:
        if keys is not None and name not in keys:
            continue
        chain = _broker_synonyms(name, value, kafka_default)
        out.append(
            _entry(
                name,
                value,
                chain[0][2],
                chain if synonyms else (),
                read_only=True,
                config_type=config_type,
                doc=doc if documentation else None,
            )
        )
    return out


class ConfigHandlers:
    """Answers DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.

    :param core: the broker core.
    :param identity: the node id (the broker resource's name).
    :param default_partitions: what ``num.partitions`` describes.
    """

    _log = Logger()

    def __init__(
        self,
        core: CoreApi,
        identity: BrokerIdentity,
        *,
        default_partitions: int,
        groups: GroupCoordinator | None = None,
        shares: ShareGroupConfigs | None = None,
        client_metrics: ClientMetricsResources | None = None,
        telemetry_max_bytes: int | None = None,
    ) -> None:
        self._core = core
        self._telemetry_max_bytes = telemetry_max_bytes
        self._client_metrics = client_metrics
        self._id = identity
        self._default_partitions = default_partitions
        self._groups = groups
        self._shares = shares

    def _group_configs(self, name: str) -> GroupConfigs:
        if self._groups is None:
            raise self._unsupported_type(ResourceType.GROUP)
        if not name:
            raise _Refused(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
        return self._groups.group_configs

    # -- checks every API shares -------------------------------------------------------

    def routes(self) -> tuple[AnyRoute, ...]:
        """This module's APIs, each handler with its ACL rule."""
        return (
            route(DESCRIBE_CONFIGS, self.describe_configs, describe_configs_rule),
            route(ALTER_CONFIGS, self.alter_configs, alter_configs_rule),
            route(
                INCREMENTAL_ALTER_CONFIGS,
                self.incremental_alter_configs,
                incremental_alter_configs_rule,
            ),
        )

    def _topic(self, name: str) -> TopicInfo:
        try:
            validate_topic_name(name)
        except InvalidTopic as e:
            raise _Refused(ErrorCode.INVALID_TOPIC_EXCEPTION, str(e)) from None
        info = self._core.topic_registry.topics().get(name)
        if info is None:
            raise _Refused(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
            )
        return info

    def _check_broker(self, name: str) -> None:
        node = str(self._id.node_id)
        if name not in ("", node):
            raise _Refused(
                ErrorCode.INVALID_REQUEST,
                f"Unexpected broker id, expected {node} or empty string, but received {name}",
            )

    @staticmethod
    def _unsupported_type(resource_type: int) -> _Refused:
        return _Refused(
            ErrorCode.INVALID_REQUEST,
            f"brokerd has no configs for resource type {resource_type} "
            "(only topics, 2, the broker, 4, client metrics, 16, and groups, 32)",
        )

    def _telemetry_row(self) -> list[tuple[str, str, str, ConfigType, str]]:
        if self._telemetry_max_bytes is None:
            return []
        return [("telemetry.max.bytes", str(self._telemetry_max_bytes),
                 str(KAFKA_TELEMETRY_MAX_BYTES_DEFAULT), ConfigType.INT,
                 "Largest metrics payload of a client's PushTelemetry (--telemetry-max-bytes).")]

    def _broker_extra(self) -> list[tuple[str, str, str, ConfigType, str]]:
        return [
            ("broker.id", str(self._id.node_id), KAFKA_BROKER_ID_DEFAULT, ConfigType.INT,
             "The node id of this broker (brokerd is a single node)."),
            ("num.partitions", str(self._default_partitions), KAFKA_NUM_PARTITIONS_DEFAULT,
             ConfigType.INT, "Partitions of an auto-created topic (--default-partitions)."),
            ("auto.create.topics.enable",
             "true" if self._core.topic_registry.auto_create_topics else "false",
             KAFKA_AUTO_CREATE_DEFAULT, ConfigType.BOOLEAN,
             "Create unknown topics on Metadata and Produce (off with --no-auto-create)."),
            *self._telemetry_row(),
            *(
                (name, value, kafka_default, ConfigType.INT,
                 f"Share groups' default of {name.removeprefix('group.')} "
                 f"(--{name.replace('.', '-')}).")
                for name, value, kafka_default in (
                    self._shares.broker_rows() if self._shares is not None else ()
                )
            ),
        ]

    # -- DescribeConfigs ---------------------------------------------------------------

    async def describe_configs(
        self, conn: RequestContext, req: Request[apis.DescribeConfigsRequest]
    ) -> apis.DescribeConfigsResponse:
        body = req.body
        synonyms = req.api_version >= 1 and body.include_synonyms
        docs = req.api_version >= 3 and body.include_documentation
        results = []
        for res in body.resources:
            keys = res.configuration_keys
            try:
                configs = self._describe_one(res, keys, synonyms=synonyms, documentation=docs)
            except _Refused as e:
                results.append(
                    apis.DescribeConfigsResult(
                        error_code=e.code, error_message=e.text,
                        resource_type=res.resource_type, resource_name=res.resource_name,
                    )
                )
                continue
            results.append(
                apis.DescribeConfigsResult(
                    resource_type=res.resource_type,
                    resource_name=res.resource_name,
                    configs=tuple(configs),
                )
            )
        return apis.DescribeConfigsResponse(results=tuple(results))

    def _describe_one(
        self,
        res: apis.DescribeConfigsResource,
        keys: Sequence[str] | None,
        *,
        synonyms: bool,
        documentation: bool,
    ) -> list[apis.DescribeConfigsResourceResult]:
        defaults = self._core.topic_config_defaults()
        if res.resource_type == ResourceType.TOPIC:
            info = self._topic(res.resource_name)
            return topic_entries(
                info, defaults, keys, synonyms=synonyms, documentation=documentation
            )
        if res.resource_type == ResourceType.BROKER:
            self._check_broker(res.resource_name)
            if res.resource_name == "":
                # Kafka: the cluster-wide dynamic defaults, of which brokerd has none.
                return []
            return broker_entries(
                defaults, self._broker_extra(), keys,
                synonyms=synonyms, documentation=documentation,
            )
        if res.resource_type == ResourceType.GROUP:
            entries = group_entries(
                self._group_configs(res.resource_name), res.resource_name, keys,
                synonyms=synonyms, documentation=documentation,
            )
            if self._shares is not None:
                entries.extend(self._shares.describe(res.resource_name, keys))
            return entries
        if res.resource_type == ResourceType.CLIENT_METRICS:
            return self._describe_client_metrics(res.resource_name, keys, documentation)
        raise self._unsupported_type(res.resource_type)

    def _metrics_resources(self, name: str) -> ClientMetricsResources:
        if self._client_metrics is None:
            raise self._unsupported_type(ResourceType.CLIENT_METRICS)
        if not name:
            raise _Refused(ErrorCode.INVALID_REQUEST, "Client metrics name must not be empty")
        return self._client_metrics

    def _describe_client_metrics(
        self, name: str, keys: Sequence[str] | None, documentation: bool
    ) -> list[apis.DescribeConfigsResourceResult]:
        configs = self._metrics_resources(name).configs(name) or {}
        return [
            _entry(
                key, value, ConfigSource.CLIENT_METRICS_CONFIG, (),
                read_only=False, config_type=CLIENT_METRICS_CONFIGS[key].type,
                doc=CLIENT_METRICS_CONFIGS[key].documentation if documentation else None,
            )
            for key, value in sorted(configs.items())
            if key in CLIENT_METRICS_CONFIGS and (keys is None or key in keys)
        ]

    # -- AlterConfigs and IncrementalAlterConfigs --------------------------------------

    async def alter_configs(
        self, conn: RequestContext, req: Request[apis.AlterConfigsRequest]
    ) -> apis.AlterConfigsResponse:
        body = req.body

        def update_for(
            res: apis.AlterConfigsResource,
        ) -> Callable[[Mapping[str, str]], Mapping[str, str | None]]:
            names = [c.name for c in res.configs]
            duplicated = sorted({n for n in names if names.count(n) > 1})
            if duplicated:
                raise _Refused(
                    ErrorCode.INVALID_REQUEST, f"Duplicate config keys: {', '.join(duplicated)}"
                )
            new = {c.name: c.value for c in res.configs}
            return lambda _current: new

        results = await self._alter(body.resources, body.validate_only, update_for)
        return apis.AlterConfigsResponse(responses=results)

    async def incremental_alter_configs(
        self, conn: RequestContext, req: Request[apis.IncrementalAlterConfigsRequest]
    ) -> IncrementalAlterConfigsResponse:
        body = req.body
        if any(r.resource_type in _OWN_STORES for r in body.resources):
            return await self._alter_with_groups(body)
        return IncrementalAlterConfigsResponse(responses=await self._incremental(body))

    async def _incremental(
        self, body: apis.IncrementalAlterConfigsRequest
    ) -> tuple[apis.AlterConfigsResourceResponse, ...]:
        defaults = self._core.topic_config_defaults()

        def update_for(
            res: apis.IncrementalAlterConfigsResource,
        ) -> Callable[[Mapping[str, str]], Mapping[str, str | None]]:
            _refuse_duplicate_keys(res)
            ops = []
            for c in res.configs:
                try:
                    op = AlterOp(c.config_operation)
                except ValueError:
                    raise _Refused(
                        ErrorCode.INVALID_REQUEST,
                        f"Unknown config operation {c.config_operation} for {c.name}",
                    ) from None
                ops.append((c.name, op, c.value))
            return lambda current: apply_incremental(current, defaults, ops)

        return await self._alter(body.resources, body.validate_only, update_for)

    async def _alter_with_groups(
        self, body: apis.IncrementalAlterConfigsRequest
    ) -> IncrementalAlterConfigsResponse:
        """An IncrementalAlterConfigs naming groups or client-metrics resources: those
        here, the rest as usual, the answers in request order."""
        others = [r for r in body.resources if r.resource_type not in _OWN_STORES]
        rest: dict[tuple[int, str], apis.AlterConfigsResourceResponse] = {}
        if others:
            answered = await self._incremental(attrs.evolve(body, resources=tuple(others)))
            rest = {(r.resource_type, r.resource_name): r for r in answered}
        keys = [(r.resource_type, r.resource_name) for r in body.resources]
        out = []
        for res in body.resources:
            key = (res.resource_type, res.resource_name)
            if res.resource_type not in _OWN_STORES:
                out.append(rest[key])
                continue
            code, text = ErrorCode.NONE, ""
            try:
                if keys.count(key) > 1:
                    raise _Refused(ErrorCode.INVALID_REQUEST, "Duplicate resource in request")
                if res.resource_type == ResourceType.CLIENT_METRICS:
                    await self._alter_client_metrics(res, body.validate_only)
                else:
                    await self._alter_group(res, body.validate_only)
            except _Refused as e:
                code, text = e.code, e.text
            out.append(apis.AlterConfigsResourceResponse(
                error_code=code, error_message=text if code else None,
                resource_type=res.resource_type, resource_name=res.resource_name,
            ))
        return IncrementalAlterConfigsResponse(responses=tuple(out))

    async def _alter_client_metrics(
        self, res: apis.IncrementalAlterConfigsResource, validate_only: bool
    ) -> None:
        resources = self._metrics_resources(res.resource_name)
        _refuse_duplicate_keys(res)
        ops = [(c.name, c.config_operation, c.value) for c in res.configs]
        try:
            await resources.alter(res.resource_name, ops, validate_only=validate_only)
        except InvalidClientMetricsConfig as e:
            raise _Refused(ErrorCode.INVALID_CONFIG, str(e)) from None
        except OSError as e:
            raise _Refused(
                unexpected_code(self._log, "alter client metrics", e), message(e)
            ) from None

    async def _alter_group(
        self, res: apis.IncrementalAlterConfigsResource, validate_only: bool
    ) -> None:
        configs = self._group_configs(res.resource_name)
        _refuse_duplicate_keys(res)
        # Share groups' configs live with their share state, the others with the group
        # coordinator's; both are checked before either is changed.
        shared = [c for c in res.configs if is_group_config(c.name)]
        ops = [
            (c.name, c.config_operation, c.value)
            for c in res.configs
            if not is_group_config(c.name)
        ]
        if shared and self._shares is None:
            raise _Refused(ErrorCode.INVALID_CONFIG, "Share groups are not enabled")
        for check_only in (True, False) if not validate_only else (True,):
            if shared and self._shares is not None:
                try:
                    await self._shares.alter(
                        res.resource_name, shared, incremental=True, validate_only=check_only
                    )
                except GroupConfigRefused as e:
                    raise _Refused(e.code, e.text) from None
            if ops:
                try:
                    code = await configs.alter(res.resource_name, ops, validate_only=check_only)
                except InvalidGroupConfig as e:
                    raise _Refused(ErrorCode.INVALID_CONFIG, str(e)) from None
                if code:
                    raise _Refused(ErrorCode(code), "the group configs could not be stored")

    async def _alter(
        self,
        resources: Sequence[AlterResource],
        validate_only: bool,
        update_for: Callable[
            [AlterResource], Callable[[Mapping[str, str]], Mapping[str, str | None]]
        ],
    ) -> tuple[apis.AlterConfigsResourceResponse, ...]:
        """One result per resource (both alter APIs answer this layout)."""
        keys = [(r.resource_type, r.resource_name) for r in resources]
        out = []
        for res in resources:
            code, text = ErrorCode.NONE, ""
            try:
                if keys.count((res.resource_type, res.resource_name)) > 1:
                    raise _Refused(ErrorCode.INVALID_REQUEST, "Duplicate resource in request")
                await self._alter_one(res, validate_only, update_for)
            except _Refused as e:
                code, text = e.code, e.text
            out.append(
                apis.AlterConfigsResourceResponse(
                    error_code=code,
                    error_message=text if code else None,
                    resource_type=res.resource_type,
                    resource_name=res.resource_name,
                )
            )
        return tuple(out)

    async def _alter_one(
        self,
        res: AlterResource,
        validate_only: bool,
        update_for: Callable[
            [AlterResource], Callable[[Mapping[str, str]], Mapping[str, str | None]]
        ],
    ) -> None:
        if res.resource_type == ResourceType.BROKER:
            self._check_broker(res.resource_name)
            if res.configs:
                names = ", ".join(sorted({c.name for c in res.configs}))
                raise _Refused(
                    ErrorCode.INVALID_CONFIG,
                    f"Cannot update these configs dynamically: {names} (brokerd's broker "
                    "configs are read-only: set them on the command line)",
                )
            return
        if res.resource_type != ResourceType.TOPIC:
            raise self._unsupported_type(res.resource_type)
        self._topic(res.resource_name)
        update = update_for(res)
        try:
            await self._core.alter_topic_configs(
                res.resource_name, update, validate_only=validate_only
            )
        except InvalidConfig as e:
            raise _Refused(ErrorCode.INVALID_CONFIG, str(e)) from None
        except Exception as e:
            raise _Refused(unexpected_code(self._log, "alter configs", e), message(e)) from None


# -- ACL rules (brokerd.kafka.server.acl_gate) ----------------------------------------


def _config_error(access: Access, op: Operation) -> Callable[[tuple[int, str]], ErrorCode | None]:
    def error(resource: tuple[int, str]) -> ErrorCode | None:
        rtype, name = resource
        if rtype == ResourceType.TOPIC:
            return None if access.topic(op, name) else TOPIC_DENIED
        if rtype == ResourceType.GROUP:
            return None if access.group(op, name) else GROUP_DENIED
        # Broker and broker-logger configs belong to the cluster.
        return None if access.cluster(op) else CLUSTER_DENIED

    return error


def _resource(
    r: apis.DescribeConfigsResource
    | apis.AlterConfigsResource
    | apis.IncrementalAlterConfigsResource,
) -> tuple[int, str]:
    return (r.resource_type, r.resource_name)


def describe_configs_rule(
    access: Access, req: Request[apis.DescribeConfigsRequest]
) -> Gate[apis.DescribeConfigsRequest, apis.DescribeConfigsResponse]:
    return split_entries(
        req, req.body.resources, _resource, _config_error(access, Operation.DESCRIBE_CONFIGS),
        lambda r, code: apis.DescribeConfigsResult(
            error_code=code, error_message=DENIED_TEXT,
            resource_type=r.resource_type, resource_name=r.resource_name,
        ),
        narrow=lambda kept: attrs.evolve(req.body, resources=kept),
        widen=lambda r, denied: attrs.evolve(r, results=(*r.results, *denied)),
    )


def _alter_denied(
    r: apis.AlterConfigsResource | apis.IncrementalAlterConfigsResource, code: ErrorCode
) -> apis.AlterConfigsResourceResponse:
    return apis.AlterConfigsResourceResponse(
        error_code=code, error_message=DENIED_TEXT,
        resource_type=r.resource_type, resource_name=r.resource_name,
    )


def alter_configs_rule(
    access: Access, req: Request[apis.AlterConfigsRequest]
) -> Gate[apis.AlterConfigsRequest, apis.AlterConfigsResponse]:
    return split_entries(
        req, req.body.resources, _resource, _config_error(access, Operation.ALTER_CONFIGS),
        _alter_denied,
        narrow=lambda kept: attrs.evolve(req.body, resources=kept),
        widen=lambda r, denied: attrs.evolve(r, responses=(*r.responses, *denied)),
    )


def incremental_alter_configs_rule(
    access: Access, req: Request[apis.IncrementalAlterConfigsRequest]
) -> Gate[apis.IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse]:
    return split_entries(
        req, req.body.resources, _resource, _config_error(access, Operation.ALTER_CONFIGS),
        _alter_denied,
        narrow=lambda kept: attrs.evolve(req.body, resources=kept),
        widen=lambda r, denied: attrs.evolve(r, responses=(*r.responses, *denied)),
    )
