# -*- test-case-name: tests.web.test_client_pages -*-
"""The console's view of client telemetry (KIP-714): the overview's "Clients" section
(one row per client instance that asked for its subscription or pushed) and
``/clients``, every client with the metrics it pushed last.

Kafka hands pushed metrics to a plugin and shows them nowhere; here an operator sees
which clients are connected, what software they run, what they were asked to push and
what they pushed, beside the broker's own figures. Only principals that may see the
broker's settings see them (the metrics name topics and brokers of every client).

Pure rendering over :class:`brokerd.operator.telemetry_face.TelemetryClientView`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from twisted.web.template import Flattenable, Tag, tags

from brokerd.operator.telemetry_face import TelemetryClientView
from brokerd.web.console_html import cell, count, duration, stamp, table
from brokerd.web.markup import facts

#: Series shown per client on ``/clients`` (the rest are on ``/metrics``).
SHOWN_SERIES = 200


def _subscribed(client: TelemetryClientView) -> str:
    if not client.subscribed:
        return "nothing"
    if client.subscribed == ("",):
        return "every metric"
    return ", ".join(client.subscribed)


def _last_push(client: TelemetryClientView, now: float) -> str:
    if client.last_push is None:
        return "never"
    return f"{duration(max(0.0, now - client.last_push))} ago"


def _value(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if v == int(v) and abs(v) < 1e15:
        return f"{int(v):,}"
    return f"{v:,.4g}"


def _anchor(client: TelemetryClientView) -> str:
    return f"client-{client.instance_id}"


def clients_section(clients: Sequence[TelemetryClientView], now: float) -> Tag:
    """The overview's "Clients" section: one row per client instance."""
    rows = (
        tags.tr(
            cell(tags.a(c.client_id or "(no client id)", href=f"/clients#{_anchor(c)}")),
            cell(c.software),
            cell(c.address),
            cell(count(c.pushes), num=True),
            cell(_last_push(c, now)),
            cell(count(len(c.series)), num=True),
        )
        for c in clients
    )
    body = table(
        ("client", "software", "address", "pushes", "last push", "series"),
        rows,
        empty="No client has asked for its telemetry subscription yet.",
        numeric=(3, 5),
    )
    return tags.section(tags.h2("Clients"), body, id="clients")


def clients_page(clients: Sequence[TelemetryClientView], now: float, render: int) -> list[Tag]:
    """``/clients``: every client instance and the metrics it pushed last."""
    out: list[Tag] = [
        stamp(render, now),
        tags.h1("Clients"),
        tags.p(
            "Client instances known by their telemetry (KIP-714): a client asks for its "
            "subscription when it connects, and pushes the subscribed metrics every interval "
            "once a client-metrics resource matches it (kafka-client-metrics --alter).",
            class_="muted",
        ),
    ]
    if not clients:
        out.append(tags.p("No client has asked for its telemetry subscription yet."))
    for c in clients:
        series = sorted(c.series, key=lambda s: (s.name, s.attributes))
        rows = (
            tags.tr(
                cell(tags.code(s.name)),
                cell(", ".join(f"{k}={v}" for k, v in s.attributes)),
                cell(_value(s.value), num=True),
            )
            for s in series[:SHOWN_SERIES]
        )
        more: Flattenable = ""
        if len(series) > SHOWN_SERIES:
            more = tags.p(
                f"{count(len(series) - SHOWN_SERIES)} more series on /metrics.", class_="muted"
            )
        out.append(
            tags.section(
                tags.h2(c.client_id or "(no client id)"),
                facts(
                    [
                        ("instance", tags.code(c.instance_id)),
                        ("software", c.software or "unknown"),
                        ("address", c.address),
                        ("subscribed", _subscribed(c)),
                        ("interval", f"{c.push_interval_ms:,} ms"),
                        ("pushes", count(c.pushes)),
                        ("last push", _last_push(c, now)),
                        ("state", "terminated" if c.terminating else "active"),
                    ]
                ),
                table(
                    ("metric", "attributes", "value"),
                    rows,
                    empty="Nothing pushed yet.",
                    numeric=(2,),
                ),
                more,
                id=_anchor(c),
            )
        )
    return out


__all__ = ["clients_page", "clients_section"]
