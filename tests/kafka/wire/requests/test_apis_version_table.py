"""docs/kafka.md's table of APIs and versions is what the broker advertises: a running
``twistd broker`` is asked ApiVersions over a socket, and its answer must equal the table,
row for row (key, name and version range)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.requests.apis import ApiVersionsRequest

from tests import paths
from tests.brokerproc import BrokerProcess
from tests.kafka_helpers import RawKafka, module_broker

pytestmark = pytest.mark.broker

DOC = paths.REPO / "docs" / "kafka.md"
HEADER = "| key | API | versions | notes |"
ROW = re.compile(r"^\| (\d+) \| (\w+) \| (\d+)(?:-(\d+))? \|")


def documented() -> dict[int, tuple[str, int, int]]:
    """The table's rows: key -> (API name, lowest, highest version)."""
    lines = DOC.read_text().splitlines()
    start = lines.index(HEADER) + 2
    rows: dict[int, tuple[str, int, int]] = {}
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        match = ROW.match(line)
        assert match, f"a row of the version table does not parse: {line!r}"
        key, name, low, high = match.groups()
        assert int(key) not in rows, f"API key {key} is in the table twice"
        rows[int(key)] = (name, int(low), int(high if high is not None else low))
    return rows


def camel(key: ApiKey) -> str:
    """ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS -> DescribeUserScramCredentials."""
    return "".join(word.capitalize() for word in key.name.split("_"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from module_broker(tmp_path_factory, "version-table")


def test_the_table_equals_the_brokers_api_versions_answer(broker: BrokerProcess) -> None:
    with RawKafka(broker) as kafka:
        answer = kafka.call(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
    assert answer.error_code == 0
    advertised = {
        r.api_key: (camel(ApiKey(r.api_key)), r.min_version, r.max_version)
        for r in answer.api_keys
    }
    table = documented()
    assert sorted(table) == sorted(advertised), (
        f"in the table only: {sorted(set(table) - set(advertised))}; "
        f"advertised only: {sorted(set(advertised) - set(table))}"
    )
    for key, row in table.items():
        assert row == advertised[key], f"key {key}: table {row}, broker {advertised[key]}"
