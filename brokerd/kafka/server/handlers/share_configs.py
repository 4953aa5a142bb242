# -*- test-case-name: tests.kafka.server.handlers.test_share_clients -*-
"""Share groups' configs as Kafka's GROUP config resource (type 32) in DescribeConfigs
and IncrementalAlterConfigs / AlterConfigs: ``share.record.lock.duration.ms``,
``share.delivery.count.limit``, ``share.auto.offset.reset``, ``share.isolation.level``,
``share.heartbeat.interval.ms``, ``share.session.timeout.ms`` (names, defaults and bounds
in :mod:`brokerd.core.share.config`), kept durably in the share-state journal.

:class:`ShareGroupConfigs` is what the configs handlers call for a GROUP resource's
``share.*`` names (``configs.py`` routes the others to the group coordinator's table);
ACLs as Kafka: DESCRIBE_CONFIGS / ALTER_CONFIGS on the group.
"""

from __future__ import annotations

from collections.abc import Sequence

from brokerd.core.share.config import (
    BROKER_LEVEL,
    DEFAULTS,
    InvalidShareConfig,
    broker_name,
    validate,
)
from brokerd.core.share.service import ShareService
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.wire.messages.configs import AlterableConfig, IncrementalAlterableConfig
from brokerd.kafka.wire.requests import apis

__all__ = ["GroupConfigRefused", "ShareGroupConfigs"]

_DYNAMIC_GROUP_CONFIG = 8
_STATIC_BROKER_CONFIG = 4
_DEFAULT_CONFIG = 5
#: IncrementalAlterConfigs operations.
_SET, _DELETE = 0, 1


class GroupConfigRefused(Exception):
    def __init__(self, code: ErrorCode, text: str) -> None:
        super().__init__(text)
        self.code = code
        self.text = text


class ShareGroupConfigs:
    """The ``share.*`` configs of the GROUP resource, kept in the share-state journal."""

    def __init__(self, service: ShareService) -> None:
        self._service = service

    def describe(
        self, group: str, keys: Sequence[str] | None
    ) -> list[apis.DescribeConfigsResourceResult]:
        engine = self._service.engine
        overrides = engine.overrides(group)
        out = []
        for name in sorted(DEFAULTS):
            if keys and name not in keys:
                continue
            if name in overrides:
                source = _DYNAMIC_GROUP_CONFIG
            elif engine.defaults[name] != DEFAULTS[name]:
                source = _STATIC_BROKER_CONFIG  # the broker's option changed it
            else:
                source = _DEFAULT_CONFIG
            out.append(
                apis.DescribeConfigsResourceResult(
                    name=name,
                    value=overrides.get(name, engine.defaults[name]),
                    config_source=source,
                    config_type=_config_type(name),
                )
            )
        return out

    def broker_rows(self) -> list[tuple[str, str, str]]:
        """The broker configs share groups default to (``group.share.*``): name, the
        broker's value, Kafka's default."""
        defaults = self._service.engine.defaults
        return [
            (broker_name(name), defaults[name], DEFAULTS[name])
            for name in sorted(BROKER_LEVEL)
        ]

    async def alter(
        self,
        group: str,
        configs: Sequence[AlterableConfig | IncrementalAlterableConfig],
        *,
        incremental: bool,
        validate_only: bool,
    ) -> None:
        """:raises GroupConfigRefused: an unknown name, a bad value or operation."""
        current = self._service.engine.overrides(group) if incremental else {}
        for c in configs:
            op = getattr(c, "config_operation", _SET) if incremental else _SET
            if op == _DELETE:
                current.pop(c.name, None)
                continue
            if op != _SET or c.value is None:
                raise GroupConfigRefused(
                    ErrorCode.INVALID_REQUEST, f"Unsupported operation {op} for {c.name}"
                )
            try:
                validate(c.name, c.value)
            except InvalidShareConfig as e:
                raise GroupConfigRefused(ErrorCode.INVALID_CONFIG, str(e)) from None
            current[c.name] = c.value
        if not validate_only:
            await self._service.set_overrides(group, current)


def _config_type(name: str) -> int:
    """DescribeConfigs' ConfigType: INT, BOOLEAN or STRING."""
    if name.endswith((".ms", ".limit")):
        return 3
    return 1 if name.endswith(".enable") else 2
