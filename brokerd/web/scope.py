# -*- test-case-name: tests.web.test_auth -*-
"""What one HTTP request may see: the console's topics and groups, its history, the
broker's settings, the ``/metrics`` series and ``/readyz``'s reasons.

Without ``--authorizer acl`` every request sees everything (once ``--http-auth`` let it
in). With it, a request's principal (:mod:`brokerd.web.auth`) sees what it may DESCRIBE,
by the rules of :mod:`brokerd.operator.visibility`: topics it may not DESCRIBE are left out
everywhere (the topic list, group offsets and assignments, lag totals, the history's
rates, every series with a ``topic`` label), groups it may not DESCRIBE likewise
(``group`` labels included); a topic's configs need DESCRIBE_CONFIGS on it, the broker's
settings DESCRIBE_CONFIGS on the cluster, and ``/readyz``'s reasons (which name offline
partitions) DESCRIBE on the cluster. Series without those labels (process, requests per
API, connections) are shown to everyone let in.

What it does not do: authenticate, render, or change anything.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

import attrs
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from twisted.web.server import Request

from brokerd.operator.views import GroupView, TopicView
from brokerd.operator.visibility import Visibility
from brokerd.security.acl import CLUSTER_NAME, AclAuthorizer, Operation, ResourceType
from brokerd.web.auth import HttpIdentity
from brokerd.web.console_history import ConsoleSource, Sample

__all__ = ["EVERYTHING", "UNAUTHENTICATED", "RequestScope", "ScopeOf", "ScopedSource", "Scoper"]


@attrs.frozen
class RequestScope:
    """What one request may see: ``visibility`` None is everything; ``principal`` None
    means the request did not authenticate (only the open paths serve it)."""

    visibility: Visibility | None
    principal: str | None

    @property
    def everything(self) -> bool:
        return self.visibility is None and self.principal is not None

    def source(self, inspector: ConsoleSource) -> ConsoleSource:
        if self.visibility is None:
            return inspector
        return ScopedSource(inspector, self.visibility)

    def samples(self, samples: Sequence[Sample]) -> tuple[Sample, ...]:
        visibility = self.visibility
        if visibility is None:
            return tuple(samples)
        return tuple(_scoped_sample(s, visibility) for s in samples)

    @property
    def shows_settings(self) -> bool:
        return self.everything or (
            self.visibility is not None and self.visibility.cluster_configs()
        )

    @property
    def shows_reasons(self) -> bool:
        if self.visibility is None:
            return self.principal is not None
        return self.visibility.authorizer.authorize(
            self.visibility.principal, self.visibility.host, Operation.DESCRIBE,
            ResourceType.CLUSTER, CLUSTER_NAME,
        )

    def collector(self, registry: Collector) -> Collector:
        """``registry`` as this request may scrape it."""
        if self.visibility is None:
            return registry
        return _ScopedCollector(registry, self.visibility)


#: The scope of a request on a broker that checks nothing.
EVERYTHING = RequestScope(None, "User:ANONYMOUS")


class ScopedSource:
    """The console's source as one principal may see it."""

    def __init__(self, inspector: ConsoleSource, visibility: Visibility) -> None:
        self._inspector = inspector
        self._visibility = visibility

    @property
    def has_groups(self) -> bool:
        return self._inspector.has_groups

    def topics(self) -> list[TopicView]:
        return self._visibility.topic_views(self._inspector.topics())

    def topic(self, name: str) -> TopicView | None:
        if not self._visibility.topic(name):
            return None
        topic = self._inspector.topic(name)
        return None if topic is None else self._visibility.topic_view(topic)

    def offline_partitions(self) -> dict[tuple[str, int], str]:
        return {
            key: why
            for key, why in self._inspector.offline_partitions().items()
            if self._visibility.topic(key[0])
        }

    def groups(self) -> list[GroupView]:
        return self._visibility.group_views(self._inspector.groups())

    def group(self, group_id: str) -> GroupView | None:
        if not self._visibility.group(group_id):
            return None
        group = self._inspector.group(group_id)
        return None if group is None else self._visibility.group_view(group)


def _scoped_sample(sample: Sample, v: Visibility) -> Sample:
    groups = [g for g in sample.group_topic_lag.keys() | sample.group_topic_committed.keys()
              if v.group(g)]
    lag = {
        g: {t: n for t, n in sample.group_topic_lag.get(g, {}).items() if v.topic(t)}
        for g in groups
    }
    committed = {
        g: {t: n for t, n in sample.group_topic_committed.get(g, {}).items() if v.topic(t)}
        for g in groups
    }
    return Sample(
        sample.time,
        {t: n for t, n in sample.topic_end_offsets.items() if v.topic(t)},
        {g: sum(per_topic.values()) for g, per_topic in lag.items()},
        {g: sum(per_topic.values()) for g, per_topic in committed.items()},
        lag,
        committed,
    )


class _ScopedCollector:
    """A registry's metrics without the samples of topics and groups the principal may
    not DESCRIBE (a family left with no sample is still sent, empty)."""

    def __init__(self, registry: Collector, visibility: Visibility) -> None:
        self._registry = registry
        self._visibility = visibility

    def _keeps(self, labels: dict[str, str]) -> bool:
        topic = labels.get("topic")
        if topic is not None and not self._visibility.topic(topic):
            return False
        group = labels.get("group")
        return group is None or self._visibility.group(group)

    def collect(self) -> Iterator[Metric]:
        for family in self._registry.collect():
            scoped = Metric(family.name, family.documentation, family.type, family.unit)
            scoped.samples = [s for s in family.samples if self._keeps(s.labels)]
            yield scoped

    def describe(self) -> Iterable[Metric]:
        return ()


class Scoper:
    """Builds each request's :class:`RequestScope` from its principal.

    :param identity: who the request is (``--http-auth``).
    :param authorizer: the ACLs (None: ``--authorizer none``, everything visible).
    """

    def __init__(self, identity: HttpIdentity, authorizer: AclAuthorizer | None) -> None:
        self._identity = identity
        self._authorizer = authorizer

    def __call__(self, request: Request) -> RequestScope:
        principal = self._identity.principal(request)
        if principal is None:
            return UNAUTHENTICATED
        if self._authorizer is None:
            return RequestScope(None, principal)
        host = str(getattr(request.getClientAddress(), "host", ""))
        return RequestScope(Visibility(self._authorizer, principal, host), principal)


#: The scope of a request that did not authenticate (served on the open paths only):
#: it sees nothing beyond the status.
UNAUTHENTICATED = RequestScope(Visibility(AclAuthorizer(), "", ""), None)

ScopeOf = Callable[[Request], RequestScope]
