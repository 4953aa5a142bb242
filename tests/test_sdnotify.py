"""``brokerd.sdnotify``: the notification datagrams, READY=1 timing, STOPPING=1, and the
start-up keep-alives, against a real datagram socket standing in for systemd's."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from twisted.application import service
from twisted.application.internet import StreamServerEndpointService
from twisted.internet import defer
from twisted.internet.protocol import Factory
from twisted.trial.unittest import SynchronousTestCase

from brokerd.sdnotify import (
    STATUS_SERVING,
    STATUS_STOPPING,
    ReadyNotifier,
    extending_start_timeout,
    sd_notify,
)

from tests.systemd_harness import Notification, NotifySocket


class FakeReactor:
    """Only ``callWhenRunning``: the test decides when the reactor "runs"."""

    def __init__(self) -> None:
        self.when_running: list[Callable[[], object]] = []

    def callWhenRunning(self, f: Callable[[], object]) -> None:
        self.when_running.append(f)

    def run(self) -> None:
        for f in self.when_running:
            f()


class PendingEndpoint:
    """An endpoint whose ``listen`` the test completes by hand."""

    def __init__(self) -> None:
        self.listening: defer.Deferred[Any] = defer.Deferred()
        self.port = object()

    def listen(self, factory: Factory[Any]) -> defer.Deferred[Any]:
        return self.listening


def wait_notes(sock: NotifySocket, count: int, timeout: float = 5.0) -> list[Notification]:
    deadline = time.monotonic() + timeout
    while len(sock.notifications) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    return list(sock.notifications)


def settle(sock: NotifySocket) -> list[Notification]:
    """Whatever arrived after a short wait (to check that nothing did)."""
    time.sleep(0.1)
    return list(sock.notifications)


class SdNotifyTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.sock = NotifySocket()
        self.addCleanup(self.sock.close)
        self.environ = {"NOTIFY_SOCKET": self.sock.address}

    def test_sends_one_datagram_with_every_field(self) -> None:
        self.assertTrue(sd_notify("READY=1\nSTATUS=serving", self.environ))
        (note,) = wait_notes(self.sock, 1)
        self.assertEqual(note.fields, {"READY": "1", "STATUS": "serving"})
        import os

        self.assertEqual(note.pid, os.getpid())

    def test_no_socket_is_a_no_op(self) -> None:
        self.assertFalse(sd_notify("READY=1", {}))
        self.assertFalse(sd_notify("READY=1", {"NOTIFY_SOCKET": ""}))
        self.assertEqual(settle(self.sock), [])

    def test_unreachable_socket_is_reported_not_raised(self) -> None:
        self.assertFalse(sd_notify("READY=1", {"NOTIFY_SOCKET": "@brokerd-test-nobody-here"}))
        self.assertFalse(sd_notify("READY=1", {"NOTIFY_SOCKET": "/nonexistent/notify"}))
        self.assertEqual(len(self.flushLoggedErrors()), 0)


class ReadyNotifierTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.sock = NotifySocket()
        self.addCleanup(self.sock.close)
        self.environ = {"NOTIFY_SOCKET": self.sock.address}
        self.reactor = FakeReactor()
        self.top = service.MultiService()

    def listener(self) -> PendingEndpoint:
        endpoint = PendingEndpoint()
        StreamServerEndpointService(endpoint, Factory()).setServiceParent(self.top)
        return endpoint

    def notifier(self) -> ReadyNotifier:
        notifier = ReadyNotifier(self.reactor, environ=self.environ)
        notifier.setServiceParent(self.top)
        return notifier

    def test_ready_waits_for_the_reactor(self) -> None:
        notifier = self.notifier()
        self.top.startService()
        self.assertEqual(settle(self.sock), [])
        self.reactor.run()
        (note,) = wait_notes(self.sock, 1)
        self.assertEqual(note.fields, {"READY": "1", "STATUS": STATUS_SERVING})
        self.assertTrue(notifier.ready_sent)

    def test_ready_waits_for_every_listener_before_it(self) -> None:
        first, second = self.listener(), self.listener()
        notifier = self.notifier()
        self.top.startService()
        self.reactor.run()
        first.listening.callback(first.port)
        self.assertEqual(settle(self.sock), [])
        self.assertFalse(notifier.ready_sent)
        second.listening.callback(second.port)
        (note,) = wait_notes(self.sock, 1)
        self.assertEqual(note.fields["READY"], "1")

    def test_the_listeners_keep_their_port_for_their_own_stop(self) -> None:
        endpoint = self.listener()
        self.notifier()
        self.top.startService()
        self.reactor.run()
        stopped: list[bool] = []

        class Port:
            def stopListening(self) -> None:
                stopped.append(True)

        endpoint.listening.callback(Port())
        self.top.stopService()
        self.assertEqual(stopped, [True])

    def test_a_listener_that_fails_means_no_ready(self) -> None:
        endpoint = self.listener()
        notifier = self.notifier()
        self.top.startService()
        self.reactor.run()
        endpoint.listening.errback(OSError("address in use"))
        self.assertFalse(notifier.ready_sent)
        self.assertEqual(settle(self.sock), [])
        # The listener's own Deferred still carries the failure (start-up reports it).
        self.assertEqual(len(self.flushLoggedErrors(OSError)), 1)

    def test_stopped_before_the_reactor_runs_never_says_ready(self) -> None:
        notifier = self.notifier()
        self.top.startService()
        self.top.stopService()
        self.reactor.run()
        notes = settle(self.sock)
        self.assertEqual([n.fields for n in notes], [{"STOPPING": "1", "STATUS": STATUS_STOPPING}])
        self.assertFalse(notifier.ready_sent)

    def test_stopping_is_said_when_stopped(self) -> None:
        self.notifier()
        self.top.startService()
        self.reactor.run()
        wait_notes(self.sock, 1)
        self.top.stopService()
        notes = wait_notes(self.sock, 2)
        self.assertEqual(notes[1].fields, {"STOPPING": "1", "STATUS": STATUS_STOPPING})


class ReadyFileTests(SynchronousTestCase):
    """``--ready-file``: the named listeners' bound addresses, written at READY, removed
    at a clean stop."""

    def test_written_once_every_listener_is_bound_and_removed_at_stop(self) -> None:
        import json
        import os
        import tempfile

        from twisted.internet.address import IPv4Address

        path = os.path.join(tempfile.mkdtemp(), "ready.json")
        reactor = FakeReactor()
        top = service.MultiService()
        endpoints = {}
        for name in ("native", "kafka"):
            endpoints[name] = PendingEndpoint()
            listener = StreamServerEndpointService(endpoints[name], Factory())
            listener.setName(name)
            listener.setServiceParent(top)
        ReadyNotifier(reactor, environ={}, ready_file=path).setServiceParent(top)
        top.startService()
        reactor.run()

        class Port:
            def __init__(self, port: int) -> None:
                self.address = IPv4Address("TCP", "127.0.0.1", port)

            def getHost(self) -> IPv4Address:
                return self.address

            def stopListening(self) -> None:
                pass

        endpoints["native"].listening.callback(Port(7001))
        self.assertFalse(os.path.exists(path))
        endpoints["kafka"].listening.callback(Port(9001))
        with open(path) as ready:
            written = json.load(ready)
        self.assertEqual(
            written,
            {
                "pid": os.getpid(),
                "listeners": {"native": "127.0.0.1:7001", "kafka": "127.0.0.1:9001"},
            },
        )
        top.stopService()
        self.assertFalse(os.path.exists(path))


class ExtendStartTimeoutTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.sock = NotifySocket()
        self.addCleanup(self.sock.close)
        self.environ = {"NOTIFY_SOCKET": self.sock.address}

    def test_status_then_keep_alives_while_the_block_runs(self) -> None:
        with extending_start_timeout("recovering logs", environ=self.environ, interval=0.05):
            notes = wait_notes(self.sock, 3)
        self.assertEqual(notes[0].fields, {"STATUS": "recovering logs"})
        for note in notes[1:3]:
            self.assertEqual(note.fields["EXTEND_TIMEOUT_USEC"], "100000")
            self.assertTrue(note.fields["STATUS"].startswith("recovering logs ("))
        self.assert_nothing_after_the_block()

    def test_an_exception_in_the_block_stops_the_keep_alives(self) -> None:
        with (
            self.assertRaises(ValueError),
            extending_start_timeout("opening", environ=self.environ, interval=0.05),
        ):
            raise ValueError("bad data directory")
        self.assert_nothing_after_the_block()

    def assert_nothing_after_the_block(self) -> None:
        """Nothing once the block is done: the thread has been joined. A marker sent now
        arrives after whatever the thread sent before the join (one socket, in order),
        so what arrives after the marker is what the thread sent late."""
        sd_notify("X_MARK=1", self.environ)
        deadline = time.monotonic() + 5.0
        while not any(n.fields.get("X_MARK") for n in self.sock.notifications):
            assert time.monotonic() < deadline, "the marker never arrived"
            time.sleep(0.01)
        notes = settle(self.sock)
        mark = next(i for i, n in enumerate(notes) if n.fields.get("X_MARK"))
        self.assertEqual(notes[mark + 1:], [])

    def test_without_systemd_nothing_is_sent(self) -> None:
        with extending_start_timeout("recovering logs", environ={}, interval=0.01):
            time.sleep(0.05)
        self.assertEqual(settle(self.sock), [])
