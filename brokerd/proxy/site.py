"""The ``--http-proxy`` listener's site, assembled: the v2 and v3 routes over one
:class:`~brokerd.proxy.context.ProxyContext`, behind the HTTP layer; and the service
that closes the consumer instances when the broker stops (each leaves its group, its
auto-committed positions written first).
"""

from __future__ import annotations

from twisted.application import service
from twisted.web.server import Site

from brokerd.net.connlimit import ConnectionLimit
from brokerd.proxy.context import ProxyContext
from brokerd.proxy.http import ProxyResource, make_proxy_site
from brokerd.proxy.v2 import V2Api
from brokerd.proxy.v3 import V3Api
from brokerd.security.acl import AclAuthorizer
from brokerd.web.auth import HttpIdentity


def make_site(
    ctx: ProxyContext,
    *,
    identity: HttpIdentity,
    authorizer: AclAuthorizer | None,
    scheme: str = "http",
    connections: ConnectionLimit | None = None,
) -> Site:
    routes = [*V3Api(ctx).routes(), *V2Api(ctx).routes()]
    resource = ProxyResource(
        routes, identity=identity, authorizer=authorizer, limits=ctx.limits, scheme=scheme
    )
    return make_proxy_site(resource, ctx.limits, connections)


class InstancesService(service.Service):
    """Closes every consumer instance at stop (added before the listener, so it stops
    after it: no new instance comes meanwhile)."""

    def __init__(self, ctx: ProxyContext) -> None:
        self._ctx = ctx

    def stopService(self) -> None:
        super().stopService()
        self._ctx.instances.stop()
