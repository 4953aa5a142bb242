"""The workload of tests/faults/test_transactions_crash.py: a consume-transform-produce loop with a
confluent-kafka transactional producer, run as its own process so the test can kill the
broker (and this process) with SIGKILL at any instant.

Each transaction takes the next 1 to ``--max-inputs`` records of ``--source`` (partition 0,
read with read_committed in group ``--group``), writes for each input offset ``o`` one
record ``t<n>:in<o>:p<p>`` to every partition ``p`` of ``--sink``, sends the consumed
position for the group with ``send_offsets_to_transaction``, then commits, or aborts (with
probability ``--abort-ratio``) and goes back to the transaction's first input.

Every step is logged to ``--log``, one line each, before and after the call, so that the
test knows which transactions were committed (``committed n``: commit returned), aborted
(``aborted n``), or in doubt (``committing n`` without ``committed n``):

    begin <n> <first input offset> <last input offset>
    committing <n> | committed <n> | aborting <n> | aborted <n>
    error <n> <message>          (the process then exits 3; the test starts it again)
    hung <call>                  (a call outlived its timeout: exit 4, see WATCHDOG_SECONDS)
    done <next input offset>     (every input consumed; exit 0)

Transaction numbers keep growing across restarts (the next is one more than the log's
largest), so every record ever written names its transaction uniquely. A restarted driver
resumes from the group's committed offset: its InitProducerId aborts what its predecessor
left open. Only the standard library and confluent-kafka are imported.
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import random
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO, TypeVar

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

T = TypeVar("T")

#: Seconds for each transactional call; a broker that is down makes it fail, and the test
#: starts the driver again.
CALL_TIMEOUT = 10.0
#: librdkafka 2.16 does not enforce the timeout of send_offsets_to_transaction when the
#: group coordinator's connection went down (librdkafka issues 5456 and 5511: the request
#: waits for a broker state change that may never come). A call still running this much
#: later ends the process (``hung`` in the log), as a supervisor would restart a stuck
#: application.
WATCHDOG_SECONDS = CALL_TIMEOUT + 3
#: Short, so a transaction its killed driver left open is aborted by the broker even if no
#: successor shows up.
TXN_TIMEOUT_MS = 10_000


def last_txn_number(log: Path) -> int:
    if not log.exists():
        return 0
    lines = log.read_text().splitlines()
    numbers = [int(line.split()[1]) for line in lines if line.startswith("begin ")]
    return max(numbers, default=0)


class Watchdog:
    """Ends the process if a transactional call outlives :data:`WATCHDOG_SECONDS`."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._timer: threading.Timer | None = None

    def _fire(self, what: str) -> None:
        self._out.write(f"hung {what}\n")
        self._out.flush()
        os._exit(4)

    def __call__(self, what: str, call: Callable[..., T], *args: Any) -> T:
        self._timer = threading.Timer(WATCHDOG_SECONDS, self._fire, (what,))
        self._timer.daemon = True
        self._timer.start()
        try:
            return call(*args)
        finally:
            self._timer.cancel()


def run(args: argparse.Namespace, out: TextIO) -> int:
    rng = random.Random(args.seed)
    base = {
        "bootstrap.servers": args.bootstrap,
        "socket.connection.setup.timeout.ms": 3000,
        "reconnect.backoff.max.ms": 200,
        "topic.metadata.refresh.interval.ms": 1000,
    }
    producer = Producer(
        {**base, "transactional.id": args.txn_id, "transaction.timeout.ms": TXN_TIMEOUT_MS}
    )
    consumer = Consumer(
        {
            **base,
            "group.id": args.group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 50,
        }
    )
    n = last_txn_number(Path(args.log))
    guarded = Watchdog(out)
    try:
        guarded("init", producer.init_transactions, CALL_TIMEOUT)
        consumer.assign([TopicPartition(args.source, 0)])
        while True:
            want = rng.randint(1, args.max_inputs)
            batch = [m for m in consumer.consume(want, timeout=0.5) if m.error() is None]
            if not batch:
                tp = [TopicPartition(args.source, 0)]
                (position,) = consumer.position(tp)
                if position.offset < 0:
                    # Nothing consumed since the start: the position is unset, and the
                    # group's committed offset is where this process stands.
                    (position,) = guarded("committed", consumer.committed, tp, CALL_TIMEOUT)
                if position.offset >= args.inputs:
                    out.write(f"done {position.offset}\n")
                    return 0
                continue
            n += 1
            first, last = batch[0].offset(), batch[-1].offset()
            out.write(f"begin {n} {first} {last}\n")
            producer.begin_transaction()
            for message in batch:
                for p in range(args.partitions):
                    value = f"t{n}:in{message.offset()}:p{p}".encode()
                    producer.produce(args.sink, value=value, partition=p)
            guarded(
                f"send_offsets {n}",
                producer.send_offsets_to_transaction,
                [TopicPartition(args.source, 0, last + 1)],
                consumer.consumer_group_metadata(),
                CALL_TIMEOUT,
            )
            if rng.random() < args.abort_ratio:
                out.write(f"aborting {n}\n")
                guarded(f"abort {n}", producer.abort_transaction, CALL_TIMEOUT)
                out.write(f"aborted {n}\n")
                consumer.seek(TopicPartition(args.source, 0, first))
            else:
                out.write(f"committing {n}\n")
                guarded(f"commit {n}", producer.commit_transaction, CALL_TIMEOUT)
                out.write(f"committed {n}\n")
    except KafkaException as e:
        err: Any = e.args[0] if e.args else e
        out.write(f"error {n} {err}\n")
        return 3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--sink", required=True)
    parser.add_argument("--partitions", type=int, required=True, help="of the sink")
    parser.add_argument("--inputs", type=int, required=True, help="records in the source")
    parser.add_argument("--group", required=True)
    parser.add_argument("--txn-id", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-inputs", type=int, default=4)
    parser.add_argument("--abort-ratio", type=float, default=0.25)
    args = parser.parse_args()
    # The test asks for the stacks (to stderr) of a driver that stopped making progress.
    faulthandler.register(signal.SIGUSR1)
    with open(args.log, "a", buffering=1) as out:  # line-buffered: each line is written
        return run(args, out)


if __name__ == "__main__":
    # No client clean-up: closing them waits for a broker that may be down, and the
    # transactions this process leaves open are what the next one must cope with.
    code = main()
    sys.stdout.flush()
    os._exit(code)
