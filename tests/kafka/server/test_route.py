"""Routes as the dispatch collects them: one per API key, an API routed twice refused."""

from __future__ import annotations

from typing import Any

import pytest

from brokerd.kafka.server.handlers.produce import produce_rule
from brokerd.kafka.server.route import route, route_table
from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.messages.api_versions import API_VERSIONS
from brokerd.kafka.wire.messages.produce import PRODUCE


def answer(conn: Any, request: Any) -> Any:
    return None


def test_the_table_is_by_key_and_keeps_each_route() -> None:
    produce = route(PRODUCE, answer, produce_rule)
    versions = route(API_VERSIONS, answer, None)
    assert route_table([produce, versions]) == {
        ApiKey.PRODUCE: produce, ApiKey.API_VERSIONS: versions}


def test_an_api_routed_twice_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="PRODUCE is routed twice"):
        route_table([route(PRODUCE, answer, produce_rule), route(PRODUCE, answer, None)])
