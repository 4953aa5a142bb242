"""confluent-kafka's ``describe_user_scram_credentials()`` against a real broker that must
refuse it: without ``--credentials`` (SECURITY_DISABLED), and for a user without DESCRIBE
on the cluster under ``--authorizer acl`` (CLUSTER_AUTHORIZATION_FAILED).

librdkafka crashes the client process on a request-level error in this response, so
each call runs in a child Python process and the test checks that the child exits
normally having seen the error on every future.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.brokerproc import BrokerProcess
from tests.kafka.server.handlers.test_sasl_clients import PASSWORD, USER, write_credentials
from tests.kafka_helpers import module_broker

pytestmark = [pytest.mark.clients, pytest.mark.broker]

#: Run in a child process: describe every user, then two named users; print what each
#: future gave as JSON lines.
_DESCRIBE = """
import json, sys
from confluent_kafka.admin import AdminClient
conf = json.loads(sys.argv[1])
admin = AdminClient(conf)
def outcome(future):
    try:
        return {"result": repr(future.result(20))}
    except Exception as e:
        error = e.args[0] if e.args else None
        return {"error": error.name() if hasattr(error, "name") else repr(e)}
print(json.dumps({"all": outcome(admin.describe_user_scram_credentials())}), flush=True)
named = admin.describe_user_scram_credentials(["alice", "nobody"])
print(json.dumps({name: outcome(f) for name, f in named.items()}), flush=True)
"""


def describe_in_child(conf: dict[str, str]) -> list[dict[str, dict[str, str]]]:
    done = subprocess.run(
        [sys.executable, "-c", _DESCRIBE, json.dumps(conf)],
        capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, (
        f"client process ended with {done.returncode}: {done.stdout} {done.stderr[-1000:]}")
    return [json.loads(line) for line in done.stdout.splitlines()]


@pytest.fixture(scope="module")
def no_credentials(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from module_broker(tmp_path_factory, "no-creds")


@pytest.fixture(scope="module")
def with_acls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    creds = write_credentials(tmp_path_factory.mktemp("acl-creds") / "credentials.json")
    yield from module_broker(
        tmp_path_factory, "acl", "--sasl", "SCRAM-SHA-256", "--credentials", creds,
        "--authorizer", "acl", "--super-users", "User:admin", "--allow-anonymous", "native")


def test_without_credentials_file_the_error_comes_back_cleanly(
    no_credentials: BrokerProcess,
) -> None:
    everyone, named = describe_in_child({"bootstrap.servers": no_credentials.kafka_bootstrap})
    assert everyone == {"all": {"error": "SECURITY_DISABLED"}}
    assert named == {"alice": {"error": "SECURITY_DISABLED"},
                     "nobody": {"error": "SECURITY_DISABLED"}}


def test_without_describe_on_the_cluster_the_error_comes_back_cleanly(
    with_acls: BrokerProcess,
) -> None:
    conf = {
        "bootstrap.servers": with_acls.kafka_bootstrap,
        "security.protocol": "sasl_plaintext",
        "sasl.mechanisms": "SCRAM-SHA-256",
    }
    everyone, named = describe_in_child(
        {**conf, "sasl.username": USER, "sasl.password": PASSWORD})
    assert everyone == {"all": {"error": "CLUSTER_AUTHORIZATION_FAILED"}}
    assert named == {"alice": {"error": "CLUSTER_AUTHORIZATION_FAILED"},
                     "nobody": {"error": "CLUSTER_AUTHORIZATION_FAILED"}}
    # A super user still gets the answer itself.
    everyone, named = describe_in_child(
        {**conf, "sasl.username": "admin", "sasl.password": "admin-secret"})
    assert "result" in everyone["all"]
    assert "result" in named["alice"]
    assert named["nobody"] == {"error": "RESOURCE_NOT_FOUND"}

