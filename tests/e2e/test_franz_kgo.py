"""franz-go's own integration tests (``github.com/twmb/franz-go/pkg/kgo``, the version
``tests/go/go.sum`` pins) against a real ``twistd broker``: the client's authors' checks
of produce, consume, groups (classic and KIP-848), transactions and share groups, run
unmodified with ``KGO_SEEDS`` pointing at brokerd. Marked slow (``make test-long``): about
ten minutes on two cores.

The tests run as ``go test`` runs them (from the module's own directory, in parallel),
with ``KGO_TEST_RF=1`` (one broker: every topic has one replica) and
``KGO_TEST_RECORDS`` lowered from 500,000 to bound the run. The summary (passed, failed,
skipped, each failure's reason) is printed; every failure must be one of
:data:`LEFT_OUT`, each with the reason docs/kafka.md gives ("franz-go's integration
tests").
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterator

import pytest

from tests import paths
from tests.brokerproc import BrokerProcess
from tests.kafka_helpers import module_broker

pytestmark = [pytest.mark.slow, pytest.mark.broker]

GO_DIR = paths.REPO / "tests" / "go"
PACKAGE = "github.com/twmb/franz-go/pkg/kgo"
#: Records per ETL-style test (franz-go's default is 500,000).
RECORDS = 50_000
#: The whole run's bound (go test's own -timeout stops it first).
RUN_TIMEOUT_S = 30 * 60

#: Tests that fail against brokerd for a reason docs/kafka.md states.
LEFT_OUT: dict[str, str] = {}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    if shutil.which("go") is None:
        pytest.skip("go is not installed (franz-go's tests are Go tests)")
    yield from module_broker(tmp_path_factory, "franz-kgo")


def run_kgo_tests(
    broker: BrokerProcess, only: list[str] | None = None
) -> dict[str, tuple[str, list[str]]]:
    """Each top-level test's outcome (pass, fail, skip) and its output lines; ``only``:
    just those tests, one at a time."""
    env = {
        **os.environ,
        "KGO_SEEDS": broker.kafka_bootstrap,
        "KGO_TEST_RF": "1",
        "KGO_TEST_RECORDS": str(RECORDS),
        "KGO_LOG_LEVEL": "none",
    }
    select = [] if only is None else ["-p", "1", "-parallel", "1",
                                      "-run", "^(" + "|".join(only) + ")$"]
    run = subprocess.run(
        ["go", "test", "-json", "-count=1", "-timeout", "25m", *select, PACKAGE],
        cwd=GO_DIR, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
        check=False,
    )
    outcomes: dict[str, tuple[str, list[str]]] = {}
    output: dict[str, list[str]] = {}
    for line in run.stdout.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        test = event.get("Test")
        if not test or "/" in test:
            continue
        if event.get("Action") == "output":
            output.setdefault(test, []).append(event.get("Output", ""))
        elif event.get("Action") in ("pass", "fail", "skip"):
            outcomes[test] = (event["Action"], output.get(test, []))
    assert outcomes, f"go test ran nothing:\n{run.stderr[-4000:]}"
    return outcomes


def test_franz_go_kgo_integration_tests(broker: BrokerProcess) -> None:
    outcomes = run_kgo_tests(broker)
    counts = Counter(action for action, _ in outcomes.values())
    failed = sorted(t for t, (action, _) in outcomes.items() if action == "fail")
    print(f"\nfranz-go kgo tests against brokerd: {counts['pass']} passed, "
          f"{counts['fail']} failed, {counts['skip']} skipped")
    if failed:
        # The suite runs its tests in parallel, and its ETL tests have fixed deadlines:
        # on a loaded machine one can miss its deadline. Each failure runs again alone,
        # and only a failure then counts; both are printed.
        again = run_kgo_tests(broker, failed)
        for test in failed:
            action, lines = again.get(test, ("fail", []))
            print(f"  {test}: failed in the parallel run, {action} alone")
            if action == "pass":
                outcomes[test] = (action, lines)
        failed = sorted(t for t in failed if outcomes[t][0] == "fail")
    for test in failed:
        reason = LEFT_OUT.get(test, "NOT EXPECTED")
        # The test's own findings, not its cleanup notes ("NOT DELETING TOPIC ...").
        said = [line.rstrip() for line in outcomes[test][1]
                if line.strip() and "DELETING" not in line and "deleting" not in line]
        last = said[-8:]
        print(f"  FAIL {test} ({reason})\n    " + "\n    ".join(last))
    unexpected = [t for t in failed if t not in LEFT_OUT]
    assert not unexpected, f"franz-go tests failed against brokerd: {unexpected}"
