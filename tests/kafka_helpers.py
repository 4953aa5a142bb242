"""Shared helpers of the Kafka client matrix (kcat, confluent-kafka, kafka-python,
aiokafka), the cross-protocol tests and the idempotence tests.

Everything here talks to a real ``twistd broker`` started by :mod:`brokerproc`: a broker
per test module, bounded waits that fail with a message, record payloads (small ones and
compressible ones of a few KB), a raw Kafka connection built on the client side of
:mod:`brokerd.kafka.wire.requests.apis`, the batch headers a partition really stored (read
from its log files, so a silent fallback to "uncompressed" cannot pass), reads through the
native protocol, kcat as a subprocess, and a thread that owns and polls one consumer.
"""

from __future__ import annotations

import contextlib
import queue
import re
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

import pytest

from brokerd.kafka.wire.codec import ApiKey, RequestHeader
from brokerd.kafka.wire.requests import apis
from brokerd.storage.record.compression import Compression
from brokerd.storage.record.header import BATCH_HEADER_SIZE, BatchHeader, read_header

from tests.brokerproc import BrokerProcess

T = TypeVar("T")

#: Every codec a Kafka producer can ask for, by the name all four clients use.
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
#: Upper bound of every wait in these tests: generous for a loaded CI machine, yet a
#: hang fails in seconds rather than at the job timeout.
WAIT = 30.0
#: Group timings that keep rebalances to about a second (the broker's minimum session
#: timeout is Kafka's 6 s).
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_MS = 500
#: One consumed record: partition, offset, value.
Rec = tuple[int, int, bytes]


# -- brokers -------------------------------------------------------------------------


def module_broker(
    tmp_path_factory: pytest.TempPathFactory, name: str, *args: str
) -> Iterator[BrokerProcess]:
    """Body of a module-scoped fixture: one broker for every test of a module that does
    not need its own (each test uses its own topic names)."""
    proc = BrokerProcess(tmp_path_factory.mktemp(name) / "data", args=args).start()
    try:
        yield proc
    finally:
        proc.kill()


def crash_and_restart(broker: BrokerProcess) -> BrokerProcess:
    """SIGKILL the broker, then start it again on the same ports and data: what was
    acknowledged (produce and commits, fsynced under the default ``--fsync always``)
    must be there."""
    broker.kill()
    return broker.start()


# -- waiting -------------------------------------------------------------------------


def close_consumer(consumer: Any, timeout: float = WAIT) -> None:
    """``consumer.close()``, given ``timeout`` seconds. librdkafka's close once hung for
    good in a full-suite run (the broker had nothing in flight for it, and the connection
    went idle); the same test passed in every run alone. A hang here is reported as a
    warning and the handle is abandoned, so one stuck client cannot hold up the suite."""
    done = threading.Thread(target=consumer.close, name="consumer-close", daemon=True)
    done.start()
    done.join(timeout)
    if done.is_alive():
        warnings.warn(f"consumer.close() still running after {timeout} s", stacklevel=2)


def wait_until(
    predicate: Callable[[], T], what: str, *, timeout: float = WAIT, interval: float = 0.05
) -> T:
    """Poll ``predicate`` until it returns something truthy and return that; fail with
    ``what`` in the message after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


# -- payloads ------------------------------------------------------------------------


def small_values(tag: str, count: int, start: int = 0) -> list[bytes]:
    """``count`` distinct short values (no spaces or newlines: kcat reads lines)."""
    return [f"{tag}-{i:04d}".encode() for i in range(start, start + count)]


def compressible_values(tag: str, count: int, size: int = 4000) -> list[bytes]:
    """``count`` distinct values of ``size`` bytes that every codec shrinks a lot.

    librdkafka keeps a batch uncompressed when compressing does not make it smaller, so
    codec tests need payloads like these (a few KB, repetitive, still one line each).
    """
    out = []
    for i in range(count):
        head = f"{tag}-{i:04d}:".encode()
        body = (b"abcdefgh" * (size // 8 + 1))[: size - len(head)]
        out.append(head + body)
    return out


# -- what the log holds --------------------------------------------------------------


def offset_inside_a_batch(broker: BrokerProcess, topic: str, partition: int) -> int:
    """An offset that is not the first of its stored batch (reading from it must skip the
    batch's earlier records). How a client groups records into batches depends on timing,
    so the test asks the log instead of assuming a split."""
    for header in stored_batches(broker, topic, partition):
        if header.last_offset > header.base_offset:
            return header.base_offset + 1
    raise AssertionError(f"every record of {topic}-{partition} is in a batch of its own")


def stored_batches(broker: BrokerProcess, topic: str, partition: int) -> list[BatchHeader]:
    """Headers of every batch in the partition's log files, read straight from disk.

    The broker stores a client's batch as it arrived (only base offset and leader epoch
    are rewritten), so the codec bits here are what the client really sent.
    """
    directory = broker.data_dir / f"{topic}-{partition}"
    headers: list[BatchHeader] = []
    for path in sorted(directory.glob("*.log")):
        data = path.read_bytes()
        pos = 0
        while pos + BATCH_HEADER_SIZE <= len(data):
            header = read_header(data, pos)
            if header.batch_length <= 0 or pos + header.size > len(data):
                break  # a batch still being written (or preallocated zeros)
            headers.append(header)
            pos += header.size
    return headers


def stored_codecs(broker: BrokerProcess, topic: str, partition: int) -> set[str]:
    """The codec names of the partition's stored batches."""
    return {
        Compression(h.compression).name.lower() for h in stored_batches(broker, topic, partition)
    }


def native_records(
    broker: BrokerProcess, topic: str, partition: int, start: int = 0
) -> list[tuple[int, bytes]]:
    """``(offset, value)`` of every record from ``start`` to the high watermark, read
    through the native protocol's LongPollFetch (which reports offsets)."""
    out: list[tuple[int, bytes]] = []
    with broker.client() as client:
        _, end = client.list_offsets(topic, partition)
        offset = start
        while offset < end:
            response = client.poll(topic, partition, offset, max_wait_ms=0, min_bytes=0)
            assert response.records, f"no records at {topic}/{partition}@{offset} < {end}"
            for record in response.records:
                out.append((record.offset, record.value))
            offset = response.records[-1].offset + 1
    return out


def expected(partition: int, first_offset: int, values: Sequence[bytes]) -> list[Rec]:
    """The records ``values`` become when appended to ``partition`` at ``first_offset``."""
    return [(partition, first_offset + i, v) for i, v in enumerate(values)]


# -- a raw Kafka connection ----------------------------------------------------------


class RawKafka:
    """One Kafka connection driven by hand: requests are encoded with the client side of
    :mod:`brokerd.kafka.wire.requests.apis`, so the tests choose every field (producer id,
    sequence)."""

    def __init__(self, broker: BrokerProcess, *, timeout: float = 10.0) -> None:
        assert broker.kafka_port is not None
        self._sock = socket.create_connection(("127.0.0.1", broker.kafka_port), timeout=timeout)
        self._correlation = 0
        self._pending: list[tuple[int, ApiKey, int]] = []

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> RawKafka:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, api_key: ApiKey, version: int, body: Any, *, answered: bool = True) -> int:
        """Send one request without waiting; returns its correlation id. ``answered``
        False: a request the broker never answers (acks=0 Produce)."""
        self._correlation += 1
        header = RequestHeader(int(api_key), version, self._correlation, "brokerd-tests")
        self._sock.sendall(apis.encode_request(header, body))
        if answered:
            self._pending.append((self._correlation, api_key, version))
        return self._correlation

    def receive(self) -> Any:
        """The body of the oldest unanswered request's response (answers come in order)."""
        correlation, api_key, version = self._pending.pop(0)
        (size,) = struct.unpack(">i", self._recv_exactly(4))
        got, body = apis.decode_response(api_key, version, self._recv_exactly(size))
        assert got == correlation, f"response {got} arrived for request {correlation}"
        return body

    def call(self, api_key: ApiKey, version: int, body: Any) -> Any:
        self.send(api_key, version, body)
        return self.receive()

    def scram_login(self, user: str, password: str) -> None:
        """Authenticate as ``user`` with SASL/SCRAM-SHA-256, as Kafka clients do
        (SaslHandshake v1, then the SCRAM exchange in SaslAuthenticate)."""
        from brokerd.kafka.wire.messages import sasl
        from brokerd.security.scram import SCRAM_SHA_256

        from tests.kafka.server.test_sasl_session import ScramClient

        shake = self.call(
            ApiKey.SASL_HANDSHAKE, 1, sasl.SaslHandshakeRequest(mechanism=SCRAM_SHA_256.name)
        )
        assert shake.error_code == 0, shake
        scram = ScramClient(SCRAM_SHA_256, user, password)
        first = self.call(
            ApiKey.SASL_AUTHENTICATE, 1, sasl.SaslAuthenticateRequest(auth_bytes=scram.first())
        )
        assert first.error_code == 0, first
        final = self.call(
            ApiKey.SASL_AUTHENTICATE, 1,
            sasl.SaslAuthenticateRequest(auth_bytes=scram.final(first.auth_bytes)),
        )
        assert final.error_code == 0, final

    def _recv_exactly(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self._sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            buf += chunk
        return buf


def committed_offsets(
    broker: BrokerProcess, group: str, topic: str, partitions: Sequence[int]
) -> dict[int, int]:
    """The group's committed offsets as the broker stores them (OffsetFetch v5), -1 for
    none: what a consumer joining the group starts from."""
    with RawKafka(broker) as conn:
        response = conn.call(
            ApiKey.OFFSET_FETCH,
            5,
            apis.OffsetFetchRequest(
                group_id=group,
                topics=(apis.OffsetFetchTopic(name=topic, partition_indexes=tuple(partitions)),),
            ),
        )
    assert response.error_code == 0, response
    out = {}
    for t in response.topics:
        for p in t.partitions:
            assert p.error_code == 0, p
            out[p.partition_index] = p.committed_offset
    return out


def check_group_records(
    before: Sequence[Rec],
    after: Sequence[Rec],
    committed: dict[int, int],
    produced: dict[int, list[bytes]],
) -> None:
    """The group test's verdict: the records consumed after the restart start, on every
    partition that has some, exactly at the committed offset; and before + after is every
    record produced, each once, in offset order per partition."""
    first_after: dict[int, int] = {}
    for partition, offset, _ in after:
        first_after.setdefault(partition, offset)
    for partition, offset in first_after.items():
        assert offset == committed[partition], (
            f"partition {partition}: resumed at {offset}, committed {committed[partition]}"
        )
    everything = sorted([*before, *after])
    twice = sorted(r for r in set(everything) if everything.count(r) > 1)
    assert not twice, f"consumed more than once: {twice}"
    want = sorted(
        (p, offset, value) for p, values in produced.items() for offset, value in enumerate(values)
    )
    assert everything == want


# -- kcat ----------------------------------------------------------------------------

KCAT = shutil.which("kcat")
#: kcat's output format in every test: partition, offset, value on one line.
KCAT_FORMAT = "%p %o %s\\n"


def need_kcat() -> str:
    if KCAT is None:
        pytest.skip("kcat is not installed (CI installs it with apt-get install kcat)")
    return KCAT


def kcat_args(broker: BrokerProcess | str, *args: str) -> list[str]:
    """kcat's command line; ``broker`` is a broker or a bootstrap address (a proxy)."""
    bootstrap = broker if isinstance(broker, str) else broker.kafka_bootstrap
    return [need_kcat(), "-b", bootstrap, *args]


def kcat_run(
    broker: BrokerProcess | str, *args: str, stdin: bytes = b"", timeout: float = WAIT
) -> subprocess.CompletedProcess[bytes]:
    """Run kcat to completion; fail with its stderr if it exits non-zero."""
    done = subprocess.run(
        kcat_args(broker, *args), input=stdin, capture_output=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"kcat {args} exited {done.returncode}: {done.stderr!r}"
    return done


def kcat_produce(
    broker: BrokerProcess | str,
    topic: str,
    partition: int,
    values: Sequence[bytes],
    *extra: str,
) -> None:
    """Produce ``values`` (one per line) to one partition; every delivery must succeed."""
    done = kcat_run(
        broker,
        "-P",
        "-t",
        topic,
        "-p",
        str(partition),
        *extra,
        stdin=b"".join(v + b"\n" for v in values),
    )
    assert b"Delivery failed" not in done.stderr, done.stderr


def parse_kcat_records(out: bytes) -> list[Rec]:
    records = []
    for line in out.splitlines():
        partition, offset, value = line.split(b" ", 2)
        records.append((int(partition), int(offset), value))
    return records


def kcat_consume(
    broker: BrokerProcess, topic: str, partition: int, offset: str, *extra: str
) -> list[Rec]:
    """Read one partition from ``offset`` (kcat's ``-o`` syntax) to its current end.

    kcat sees the end only when a fetch comes back empty, which the broker holds for
    fetch.wait.max.ms (long poll): 100 ms instead of librdkafka's 500 keeps tests quick.
    """
    done = kcat_run(
        broker,
        "-C",
        "-t",
        topic,
        "-p",
        str(partition),
        "-o",
        offset,
        "-e",
        "-f",
        KCAT_FORMAT,
        "-X",
        "fetch.wait.max.ms=100",
        *extra,
    )
    return parse_kcat_records(done.stdout)


#: One log line of librdkafka (level, time, facility, client name, text).
_LIBRDKAFKA_LOG = re.compile(rb"%[0-7]\|\d+\.\d+\|[^|\n]*\|[^|\n]*\| [^\n]*\n")


class KcatProcess:
    """A long-running kcat (a group member, or a consumer waiting at the end of a
    partition) whose stdout records and stderr lines are collected by two threads."""

    def __init__(self, broker: BrokerProcess, *args: str) -> None:
        # -u: unbuffered output, or records sit in stdio's pipe buffer until kcat exits.
        self.proc = subprocess.Popen(
            kcat_args(broker, "-u", *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self._lock = threading.Lock()
        self._records: list[Rec] = []
        self._errors: list[str] = []
        self._threads = [
            threading.Thread(target=self._read_out, daemon=True),
            threading.Thread(target=self._read_err, daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._lock:
                self._records.extend(parse_kcat_records(line))

    def _read_err(self) -> None:
        # kcat writes its own lines in pieces, and librdkafka's threads write whole log
        # lines (``%3|<time>|FAIL|<client>| ...``) to the same stderr, which can land in
        # the middle of one of kcat's: complete log lines are cut out before splitting.
        assert self.proc.stderr is not None
        pending = b""
        while chunk := self.proc.stderr.read1(65536):
            pending = _LIBRDKAFKA_LOG.sub(b"", pending + chunk)
            *lines, pending = pending.split(b"\n")
            with self._lock:
                self._errors.extend(line.decode(errors="replace") for line in lines)
        if pending:
            with self._lock:
                self._errors.append(pending.decode(errors="replace"))

    def records(self) -> list[Rec]:
        with self._lock:
            return list(self._records)

    def stderr(self) -> list[str]:
        with self._lock:
            return list(self._errors)

    def assignment(self) -> set[int] | None:
        """Partitions of the last "assigned" line on stderr; None if the last rebalance
        line was a revocation (or there was none)."""
        current: set[int] | None = None
        for line in self.stderr():
            if "rebalanced" not in line:
                continue
            if ": assigned: " in line:
                tail = line.split(": assigned: ", 1)[1]
                current = {int(part.split("[")[1].rstrip("]")) for part in tail.split(", ")}
            else:
                current = None
        return current

    def assignments(self) -> int:
        """How many assignments (completed rebalances) kcat has reported."""
        return sum(1 for line in self.stderr() if "rebalanced" in line and ": assigned: " in line)

    def stop(self) -> int:
        """SIGTERM, the way a user stops kcat: it closes its consumer cleanly (final
        offset commit and LeaveGroup) and exits."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"kcat ignored SIGTERM; stderr: {self.stderr()}") from None
        for t in self._threads:
            t.join(WAIT)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


# -- a proxy that loses Produce answers ----------------------------------------------


def _read_frame(sock: socket.socket) -> bytes | None:
    """One whole Kafka frame (size prefix included), or None at end of stream."""
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            return None
        head += chunk
    (size,) = struct.unpack(">i", head)
    body = b""
    while len(body) < size:
        chunk = sock.recv(min(size - len(body), 1 << 16))
        if not chunk:
            return None
        body += chunk
    return head + body


class LosingProxy:
    """A loopback Kafka proxy that, after the broker has handled a Produce, drops its
    answer and cuts the client's connection: the situation in which an idempotent
    producer retries a batch the broker already stored.

    Clients reconnect to the address Metadata and FindCoordinator advertise, so the
    proxy rewrites the broker's ``127.0.0.1:<port>`` in every response to its own port
    (the port is a fixed-width int32 right after the host's bytes, whatever encodes the
    host's length: frame sizes do not change) and every connection of the client passes
    through it. ``lose`` answers are lost,
    those of the first Produce requests (acks 1/all) that cross it.
    """

    def __init__(self, broker: BrokerProcess, *, lose: int = 1) -> None:
        assert broker.kafka_port is not None
        self._target = broker.kafka_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._theirs = b"127.0.0.1" + struct.pack(">i", self._target)
        self._ours = b"127.0.0.1" + struct.pack(">i", self.port)
        self._lock = threading.Lock()
        self.to_lose = lose
        self.lost: list[int] = []  # correlation ids of the answers dropped
        self.produce_requests = 0  # Produce requests forwarded, retries included
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        with self._lock:
            sockets, self._sockets = [self._listener, *self._sockets], []
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self._target))
            with self._lock:
                self._sockets += [client, upstream]
            produces: set[int] = set()
            threading.Thread(
                target=self._requests, args=(client, upstream, produces), daemon=True
            ).start()
            threading.Thread(
                target=self._responses, args=(upstream, client, produces), daemon=True
            ).start()

    def _requests(self, src: socket.socket, dst: socket.socket, produces: set[int]) -> None:
        with contextlib.suppress(OSError):
            while (frame := _read_frame(src)) is not None:
                api_key, _version, correlation = struct.unpack_from(">hhi", frame, 4)
                if api_key == ApiKey.PRODUCE:
                    produces.add(correlation)
                    with self._lock:
                        self.produce_requests += 1
                dst.sendall(frame)
        self._cut(src, dst)

    def _responses(self, src: socket.socket, dst: socket.socket, produces: set[int]) -> None:
        with contextlib.suppress(OSError):
            while (frame := _read_frame(src)) is not None:
                (correlation,) = struct.unpack_from(">i", frame, 4)
                with self._lock:
                    lose = correlation in produces and self.to_lose > 0
                    if lose:
                        self.to_lose -= 1
                        self.lost.append(correlation)
                if lose:
                    break  # the broker stored the batch; the client never hears of it
                dst.sendall(frame.replace(self._theirs, self._ours))
        self._cut(src, dst)

    @staticmethod
    def _cut(*sockets: socket.socket) -> None:
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


# -- a thread that owns one consumer -------------------------------------------------


class Poller:
    """Polls one consumer in a thread of its own and runs calls on it between polls.

    Group clients (kafka-python, confluent-kafka) only take part in a rebalance while
    they are polled, so two members of one group must be polled concurrently; and
    neither client may be used from two threads at once. Hence this worker: it owns the
    consumer, ``poll_once`` returns the records of one short poll, and :meth:`call`
    runs anything else (assignment, commit, close) in the same thread.
    """

    def __init__(self, name: str, poll_once: Callable[[], list[Rec]]) -> None:
        self._poll_once = poll_once
        self._calls: queue.Queue[tuple[Callable[[], Any], Future[Any]]] = queue.Queue()
        self._lock = threading.Lock()
        self._records: list[Rec] = []
        self._stop = threading.Event()
        self.paused = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(queue.Empty):
                while True:
                    fn, future = self._calls.get_nowait()
                    try:
                        future.set_result(fn())
                    except BaseException as e:
                        future.set_exception(e)
            if self._stop.is_set():
                return
            if self.paused.is_set():
                time.sleep(0.02)
                continue
            try:
                got = self._poll_once()
            except BaseException as e:
                self.error = e
                return
            if got:
                with self._lock:
                    self._records.extend(got)

    def call(self, fn: Callable[[], T], timeout: float = WAIT) -> T:
        """Run ``fn`` in the polling thread and return its result."""
        if self.error is not None:
            raise AssertionError(f"the consumer failed while polling: {self.error!r}")
        future: Future[T] = Future()
        self._calls.put((fn, future))
        return future.result(timeout)

    def records(self) -> list[Rec]:
        if self.error is not None:
            raise AssertionError(f"the consumer failed while polling: {self.error!r}")
        with self._lock:
            return list(self._records)

    def stop(self, close: Callable[[], object] | None = None) -> None:
        """Run ``close`` (if given) in the thread, then end the thread before it polls
        again (polling a closed consumer raises)."""

        def finish() -> None:
            try:
                if close is not None:
                    close()
            finally:
                self._stop.set()

        if self._thread.is_alive() and self.error is None:
            self.call(finish)
        self._stop.set()
        self._thread.join(WAIT)


class RecordFeeder:
    """Produces one record to each of ``partitions`` partitions of ``topic`` every 20 ms
    (confluent-kafka, in its own thread) until :meth:`stop`: traffic for group members to
    keep receiving while the group changes."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        import confluent_kafka as ck

        self._producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self._topic = topic
        self._partitions = partitions
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="feeder", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            for p in range(self._partitions):
                self._producer.produce(self._topic, f"v{i}".encode(), partition=p)
            self._producer.poll(0)
            i += 1
            time.sleep(0.02)
        self._producer.flush(WAIT)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(WAIT)
