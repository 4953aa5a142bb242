"""kafkajs 2.2.4 transactions, unmodified, against a real ``twistd broker``.

tests/node/txn.js runs the scenario (commit, abort, commit; ``sendOffsets`` in the first
two; consumers with ``readUncommitted`` false and true) and prints what it saw; the
assertions are here: the committed transactions' records and nothing of the aborted one
under read_committed, everything under read_uncommitted, and the group's offset moving
only with a committed transaction. The broker's own view is checked too, through
confluent-kafka.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.brokerproc import BrokerProcess
from tests.e2e.test_kafkajs import need_kafkajs, run_script
from tests.kafka_helpers import committed_offsets, module_broker
from tests.txn_helpers import confluent, read_values, spread, values_of

pytestmark = [pytest.mark.clients, pytest.mark.broker]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    need_kafkajs()
    confluent()
    yield from module_broker(tmp_path_factory, "txn-kafkajs")


def test_kafkajs_transactions(broker: BrokerProcess) -> None:
    topic, source, group = "txn-js", "txn-js-in", "txn-js-group"
    result = run_script("txn.js", broker.kafka_bootstrap, topic, source, group)
    assert "error" not in result, result["error"]
    first, aborted, last = spread("c1", 6, 2), spread("a2", 6, 2), spread("c3", 4, 2)
    # After the commit with offset 4, the abort with offset 7, the commit without offsets.
    assert result["offsets"] == [4, 4, 4]
    assert [v.encode() for v in result["committed"]] == values_of(first + last)
    assert [v.encode() for v in result["uncommitted"]] == values_of(first + aborted + last)
    assert read_values(broker, topic, [0, 1], committed=True) == values_of(first + last)
    assert committed_offsets(broker, group, source, [0]) == {0: 4}
