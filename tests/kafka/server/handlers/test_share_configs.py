"""Share groups' configs as the GROUP config resource
(:class:`~brokerd.kafka.server.handlers.share_configs.ShareGroupConfigs`): each name's
value, source and type, the broker rows, and alterations validated, incremental or whole,
over a fake share service."""

from __future__ import annotations

from typing import cast

import pytest
from twisted.internet import defer

from brokerd.core.share.config import (
    AUTO_OFFSET_RESET,
    DEFAULTS,
    DELIVERY_COUNT_LIMIT,
    DLQ_COPY_RECORD,
    LOCK_DURATION,
    SESSION_TIMEOUT,
)
from brokerd.core.share.service import ShareService
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.server.handlers.share_configs import GroupConfigRefused, ShareGroupConfigs
from brokerd.kafka.wire.messages.configs import AlterableConfig, IncrementalAlterableConfig

SET, DELETE, APPEND = 0, 1, 2


class Engine:
    def __init__(self) -> None:
        self.defaults = dict(DEFAULTS)
        self.groups: dict[str, dict[str, str]] = {}

    def overrides(self, group: str) -> dict[str, str]:
        return dict(self.groups.get(group, {}))


class Service:
    def __init__(self) -> None:
        self.engine = Engine()

    async def set_overrides(self, group: str, overrides: dict[str, str]) -> None:
        self.engine.groups[group] = dict(overrides)


@pytest.fixture
def service() -> Service:
    return Service()


def configs_of(service: Service) -> ShareGroupConfigs:
    return ShareGroupConfigs(cast(ShareService, service))


def alter(service: Service, group: str, configs: list[object], *, incremental: bool,
          validate_only: bool = False) -> None:
    d = defer.Deferred.fromCoroutine(configs_of(service).alter(
        group, configs, incremental=incremental, validate_only=validate_only))  # type: ignore[arg-type]
    failures: list[BaseException] = []
    d.addErrback(lambda f: failures.append(f.value))
    if failures:
        raise failures[0]


def test_describe_names_each_value_with_its_source_and_type(service: Service) -> None:
    service.engine.groups["g"] = {LOCK_DURATION: "60000"}
    service.engine.defaults[DELIVERY_COUNT_LIMIT] = "7"
    rows = {r.name: r for r in configs_of(service).describe("g", None)}
    assert sorted(rows) == sorted(DEFAULTS)
    assert (rows[LOCK_DURATION].value, rows[LOCK_DURATION].config_source) == ("60000", 8)
    assert (rows[DELIVERY_COUNT_LIMIT].value, rows[DELIVERY_COUNT_LIMIT].config_source) == (
        "7", 4)
    assert (rows[AUTO_OFFSET_RESET].value, rows[AUTO_OFFSET_RESET].config_source) == (
        "latest", 5)
    assert rows[LOCK_DURATION].config_type == 3  # INT
    assert rows[DELIVERY_COUNT_LIMIT].config_type == 3
    assert rows[AUTO_OFFSET_RESET].config_type == 2  # STRING
    assert rows[DLQ_COPY_RECORD].config_type == 1  # BOOLEAN
    only = configs_of(service).describe("g", [SESSION_TIMEOUT])
    assert [r.name for r in only] == [SESSION_TIMEOUT]


def test_broker_rows_name_the_group_share_configs(service: Service) -> None:
    service.engine.defaults[LOCK_DURATION] = "15000"
    rows = {name: (value, kafka) for name, value, kafka in configs_of(service).broker_rows()}
    assert rows["group." + LOCK_DURATION] == ("15000", "30000")
    assert all(name.startswith("group.share.") for name in rows)
    assert "group." + AUTO_OFFSET_RESET not in rows


def test_incremental_alter_sets_and_deletes_over_the_overrides(service: Service) -> None:
    service.engine.groups["g"] = {LOCK_DURATION: "60000", SESSION_TIMEOUT: "50000"}
    alter(service, "g", [
        IncrementalAlterableConfig(name=DELIVERY_COUNT_LIMIT, config_operation=SET, value="3"),
        IncrementalAlterableConfig(name=SESSION_TIMEOUT, config_operation=DELETE),
    ], incremental=True)
    assert service.engine.groups["g"] == {LOCK_DURATION: "60000", DELIVERY_COUNT_LIMIT: "3"}


def test_a_whole_alter_replaces_the_overrides_and_validate_only_writes_nothing(
    service: Service,
) -> None:
    service.engine.groups["g"] = {LOCK_DURATION: "60000"}
    alter(service, "g", [AlterableConfig(name=DELIVERY_COUNT_LIMIT, value="4")],
          incremental=False, validate_only=True)
    assert service.engine.groups["g"] == {LOCK_DURATION: "60000"}
    alter(service, "g", [AlterableConfig(name=DELIVERY_COUNT_LIMIT, value="4")],
          incremental=False)
    assert service.engine.groups["g"] == {DELIVERY_COUNT_LIMIT: "4"}


def test_bad_names_values_and_operations_are_refused_and_nothing_written(
    service: Service,
) -> None:
    cases = [
        (IncrementalAlterableConfig(name="share.nope", config_operation=SET, value="1"),
         ErrorCode.INVALID_CONFIG),
        (IncrementalAlterableConfig(name=DELIVERY_COUNT_LIMIT, config_operation=SET,
                                    value="99"), ErrorCode.INVALID_CONFIG),
        (IncrementalAlterableConfig(name=DELIVERY_COUNT_LIMIT, config_operation=APPEND,
                                    value="3"), ErrorCode.INVALID_REQUEST),
        (IncrementalAlterableConfig(name=DELIVERY_COUNT_LIMIT, config_operation=SET),
         ErrorCode.INVALID_REQUEST),
    ]
    for config, code in cases:
        with pytest.raises(GroupConfigRefused) as refused:
            alter(service, "g", [config], incremental=True)
        assert refused.value.code is code, config
    assert service.engine.groups == {}
