"""The parts of HTTP authentication and scoping that need no broker: the console's
history as a principal sees it, and the Basic checker's memory and failure limit (a fake
clock)."""

from __future__ import annotations

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from brokerd.operator.visibility import Visibility
from brokerd.security.acl import (
    AclAuthorizer,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from brokerd.web.auth import FAILURE_WINDOW, MAX_FAILURES, REMEMBER_SECONDS, BasicPasswords
from brokerd.web.console_history import Sample
from brokerd.web.scope import RequestScope

ALICE = "User:alice"


def _allow(rtype: ResourceType, name: str) -> AclBinding:
    return AclBinding(rtype, name, PatternType.LITERAL, ALICE, "*", Operation.DESCRIBE,
                      Permission.ALLOW)


class ScopedHistoryTests(SynchronousTestCase):
    def test_rates_and_totals_leave_out_denied_topics_and_groups(self) -> None:
        sample = Sample(
            10.0,
            {"open": 5, "secret": 9},
            {"g": 9, "h": 1},
            {"g": 4, "h": 1},
            {"g": {"open": 2, "secret": 7}, "h": {"open": 1}},
            {"g": {"open": 2, "secret": 2}, "h": {"open": 1}},
        )
        authorizer = AclAuthorizer([_allow(ResourceType.TOPIC, "open"),
                                    _allow(ResourceType.GROUP, "g")])
        scope = RequestScope(Visibility(authorizer, ALICE, "h"), ALICE)
        (seen,) = scope.samples([sample])
        self.assertEqual(dict(seen.topic_end_offsets), {"open": 5})
        self.assertEqual(dict(seen.group_lag), {"g": 2})
        self.assertEqual(dict(seen.group_committed), {"g": 2})
        self.assertEqual({g: dict(t) for g, t in seen.group_topic_lag.items()},
                         {"g": {"open": 2}})
        self.assertFalse(scope.shows_settings)
        self.assertFalse(scope.shows_reasons)


class _Store:
    def __init__(self) -> None:
        self.checks = 0
        self.stored: object = "credential-1"

    def verify_password(self, user: str, password: str) -> bool:
        self.checks += 1
        return (user, password) == ("alice", "right")

    def credentials_of(self, user: str) -> object:
        return self.stored


class BasicPasswordsTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.store = _Store()
        self.passwords = BasicPasswords(self.store, clock=self.clock)

    def test_a_good_password_is_remembered_until_it_changes_or_ages(self) -> None:
        self.assertTrue(self.passwords.check("1.2.3.4", "alice", "right"))
        self.assertTrue(self.passwords.check("1.2.3.4", "alice", "right"))
        self.assertEqual(self.store.checks, 1)
        self.store.stored = "credential-2"  # brokerctl users changed it
        self.assertTrue(self.passwords.check("1.2.3.4", "alice", "right"))
        self.assertEqual(self.store.checks, 2)
        self.clock.advance(REMEMBER_SECONDS)
        self.passwords.check("1.2.3.4", "alice", "right")
        self.assertEqual(self.store.checks, 3)

    def test_an_address_that_keeps_failing_is_refused_for_the_window(self) -> None:
        for _ in range(MAX_FAILURES):
            self.assertFalse(self.passwords.refused("1.2.3.4"))
            self.assertFalse(self.passwords.check("1.2.3.4", "alice", "wrong"))
        self.assertTrue(self.passwords.refused("1.2.3.4"))
        self.assertFalse(self.passwords.refused("5.6.7.8"))
        self.clock.advance(FAILURE_WINDOW)
        self.assertFalse(self.passwords.refused("1.2.3.4"))
