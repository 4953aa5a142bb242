"""Memory a real broker process spends on hostile or careless clients, measured from
``/proc/<pid>/status`` (VmRSS), against the bounds of docs/operations.md, "Bounded memory".

* 100 connections each announcing an 8 MiB Kafka frame and then sending its bytes, on a
  ``--sasl`` listener before login: closed at the size prefix (the pre-authentication
  limit, 512 KiB), nothing buffered.
* The same on a listener without SASL: the request budget (``--queued-max-request-bytes``)
  stops reading once it is spent, so the broker holds about the budget, not 800 MiB.
* Five rounds of TLS clients that close while a large answer is unsent: the closed
  connections are freed at once, without a garbage collection, so RSS stays flat.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import struct
import threading
import time
from pathlib import Path

import pytest

from bench.common import rss_bytes
from brokerd.native import client_codec
from brokerd.security.credentials import CredentialChange, CredentialStore
from brokerd.security.scram import SCRAM_SHA_256

from tests.brokerproc import BrokerProcess
from tests.figures import record
from tests.tls_helpers import Pki, TlsBroker, client_context, make_pki

pytestmark = pytest.mark.broker

MIB = 1024 * 1024
CONNECTIONS = 100
FRAME = 8 * MIB  # the default --max-request-bytes
#: What the bounded broker may grow by under either load.
RSS_BOUND_MIB = 64
#: How long the clients push bytes (they stop sooner once every byte is sent).
PUSH_SECONDS = 6.0


def rss_mib(pid: int) -> float:
    return rss_bytes(pid) / MIB


class RssSampler:
    """The broker's peak RSS while a load runs, sampled every 20 ms in a thread."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.base = rss_mib(pid)
        self.peak = self.base
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            with contextlib.suppress(OSError):
                self.peak = max(self.peak, rss_mib(self.pid))

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_mib(self.pid))

    @property
    def growth(self) -> float:
        return self.peak - self.base


def push_frames(port: int, connections: int, frame: int, seconds: float) -> int:
    """Open ``connections`` sockets, send each a size prefix of ``frame`` bytes and then
    as much of the body as the broker takes within ``seconds`` (non-blocking, 64 KiB at
    a time, round robin). Returns the body bytes the kernel accepted in all."""
    socks = []
    for _ in range(connections):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(struct.pack(">i", frame))
        s.setblocking(False)
        socks.append([s, frame])
    chunk = b"\0" * (64 * 1024)
    sent_total = 0
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline and any(left > 0 for _, left in socks):
            progress = False
            for entry in socks:
                s, left = entry
                if left <= 0:
                    continue
                try:
                    n = s.send(chunk[: min(len(chunk), left)])
                except BlockingIOError:
                    continue
                except OSError:
                    entry[1] = 0  # closed by the broker
                    continue
                entry[1] = left - n
                sent_total += n
                progress = True
            if not progress:
                time.sleep(0.01)
    finally:
        for s, _ in socks:
            s.close()
    return sent_total


def write_credentials(path: Path) -> str:
    store = CredentialStore.open(str(path), create=True)
    store.alter([CredentialChange("alice", SCRAM_SHA_256.name,
                                  SCRAM_SHA_256.credential("alice-secret"))])
    return str(path)


def test_frames_before_login_are_refused_at_the_size_prefix(tmp_path: Path) -> None:
    creds = write_credentials(tmp_path / "credentials.json")
    broker = BrokerProcess(
        tmp_path / "data",
        args=("--sasl", "SCRAM-SHA-256", "--credentials", creds),
        native=False,
    ).start()
    try:
        assert broker.kafka_port is not None
        time.sleep(0.3)
        assert broker.proc is not None
        with RssSampler(broker.proc.pid) as rss:
            sent = push_frames(broker.kafka_port, CONNECTIONS, FRAME, PUSH_SECONDS)
            time.sleep(0.5)
        record("100 connections each sending an 8 MiB frame before login",
               f"RSS +{rss.growth:.1f} MiB (--sasl; {sent / MIB:.0f} MiB pushed)")
        assert rss.growth < RSS_BOUND_MIB, rss.growth
        log = broker.log()
        assert "before SASL authentication" in log
        # Logged at a bounded rate: the first refusal, not one line per connection.
        assert log.count("before SASL authentication") < CONNECTIONS // 2
    finally:
        broker.kill()


def test_the_request_budget_bounds_buffered_frames_without_sasl(tmp_path: Path) -> None:
    budget = 24 * MIB
    broker = BrokerProcess(
        tmp_path / "data", args=(f"--queued-max-request-bytes={budget}",)
    ).start()
    try:
        assert broker.kafka_port is not None and broker.proc is not None
        time.sleep(0.3)
        with RssSampler(broker.proc.pid) as rss:
            sent = push_frames(broker.kafka_port, CONNECTIONS, FRAME, PUSH_SECONDS)
            time.sleep(0.5)
        record("100 connections each sending an 8 MiB frame, no SASL",
               f"RSS +{rss.growth:.1f} MiB "
               f"(budget {budget // MIB} MiB; {sent / MIB:.0f} MiB pushed)")
        assert rss.growth < RSS_BOUND_MIB, rss.growth
        # The broker still serves once the flood is gone.
        with broker.client() as client:
            assert client.list_topics() == []
    finally:
        broker.kill()


# -- TLS connections closed mid-answer ------------------------------------------------

ROUNDS = 5
CLIENTS_PER_ROUND = 10
ANSWER = 8 * MIB


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def fetch_and_close(port: int, context: ssl.SSLContext, request: bytes) -> None:
    """Ask for a large answer over TLS, read a little of it, then close (the rest of the
    answer is still in the broker's buffers)."""
    raw = socket.socket()
    # A small receive window, so the answer cannot hide in the kernel's buffers.
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    raw.settimeout(10)
    raw.connect(("127.0.0.1", port))
    with context.wrap_socket(raw, server_hostname="localhost") as s:
        s.sendall(request)
        assert s.recv(4096)
        time.sleep(0.2)  # let the broker queue the whole answer


def run_round(port: int, context: ssl.SSLContext, request: bytes) -> None:
    threads = [threading.Thread(target=fetch_and_close, args=(port, context, request))
               for _ in range(CLIENTS_PER_ROUND)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def settled_rss(broker: BrokerProcess, pid: int) -> float:
    broker.until_connections(0)  # the broker has seen every close
    time.sleep(0.5)  # and freed what the closed connections held
    return rss_mib(pid)


def test_tls_clients_closing_mid_answer_leave_nothing_behind(tmp_path: Path, pki: Pki) -> None:
    broker = TlsBroker(
        tmp_path / "data", pki,
        args=(f"--max-fetch-bytes={ANSWER}", f"--max-produce-bytes={MIB}"),
    ).start()
    try:
        assert broker.proc is not None
        pid = broker.proc.pid
        value = b"v" * (64 * 1024)
        with broker.tls_client() as client:
            for _ in range(ANSWER // MIB):
                client.produce("big", 0, [value] * 15)
        request = client_codec.encode_fetch("big", 0, 0)
        context = client_context(pki)
        rounds = []
        for _ in range(ROUNDS):
            run_round(broker.native_port, context, request)
            rounds.append(settled_rss(broker, pid))
        figure = " / ".join(f"{r:.0f}" for r in rounds)
        record("five rounds of TLS clients closing mid-answer", f"RSS MiB per round: {figure}")
        # Each round leaves 80 MiB of unsent answers behind if closed connections are
        # not freed (+320 MiB from the first round to the fifth); flat means later rounds
        # reuse the memory of the first ones. The allocator's per-thread arenas (the
        # answers are built in the read pool's threads) may still settle a few steps
        # higher in the first rounds (seen: +40 MiB over rounds 3-5, flat from round 6 of
        # ten); a leak grows by about a round's answers every round (the old code: +60
        # to +90 MiB each), so over the last two rounds it would pass one round's worth.
        assert rounds[-1] - rounds[2] < CLIENTS_PER_ROUND * ANSWER / MIB, rounds
        with broker.tls_client() as client:
            assert client.list_topics()
    finally:
        broker.kill()
