"""The one socket option both listeners set (:func:`~brokerd.net.transport.disable_nagle`)."""

from __future__ import annotations

from twisted.internet.testing import StringTransport

from brokerd.net.transport import disable_nagle


class TcpLike(StringTransport):
    def __init__(self) -> None:
        super().__init__()
        self.no_delay: list[bool] = []

    def setTcpNoDelay(self, enabled: bool) -> None:
        self.no_delay.append(enabled)


def test_nagle_is_turned_off_on_tcp_and_other_transports_are_left_alone() -> None:
    tcp = TcpLike()
    disable_nagle(tcp)
    assert tcp.no_delay == [True]
    disable_nagle(StringTransport())  # a UNIX transport has no such option: no error
