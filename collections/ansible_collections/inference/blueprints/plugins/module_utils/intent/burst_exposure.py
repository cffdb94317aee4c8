# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How a burst cluster's TLS listener is reached on OpenShift (``intent["burst"]["ingress"]["exposure"]``).

The listener's hostname sits under the cluster's ``*.apps.<cluster>`` wildcard, which OpenShift's DNS points at
the OpenShift router (the default IngressController), not at Envoy Gateway's proxy. So the name is made to reach
the proxy through the router: an OpenShift ``Route`` for exactly that host, TLS ``passthrough`` (the router reads
the SNI and forwards the bytes; the Gateway's own listener terminates TLS with the site's certificate, the one
the sovereign front door verifies), to the proxy's Service.

Envoy Gateway names that Service with a hash unless the Gateway's ``EnvoyProxy`` names it
(``spec.provider.kubernetes.envoyService.name``), and creates it in its controller's namespace (the default
``ControllerNamespace`` deploy mode), where the Route must be too: a Route reaches Services of its own namespace
only. The Service port of a listener is named ``<protocol>-<port>`` lower case (github.com/envoyproxy/gateway
v1.9.0 internal/gatewayapi/helpers.go irListenerPortName; internal/infrastructure/kubernetes/proxy/
resource_provider.go Service), which the Route names as its ``targetPort``. The Service is a ClusterIP: the
router is the only way in, so no cloud load balancer is bought for it.
"""

from __future__ import annotations

ENVOY_PROXY_GROUP, ENVOY_PROXY_KIND = "gateway.envoyproxy.io", "EnvoyProxy"
# Envoy Gateway's controller namespace in its install, where it runs every Gateway's proxies and their Service
# (ControllerNamespace deploy mode); read by intent/traffic_paths.py and intent/front_door_tls.py's callers
ENVOY_GATEWAY_NAMESPACE = "envoy-gateway-system"


def listener_port_name(protocol: str, port: int) -> str:
    """The name Envoy Gateway gives the Service port of a listener."""
    return f"{protocol}-{port}".lower()


def build(site: dict, gateway: dict, name: str) -> dict:
    """The EnvoyProxy the burst Gateway names (a fixed Service name, ClusterIP) and the passthrough Route of the
    gateway's hostname to it. ``gateway``: the burst ingress's gateway (hostname, port, listener protocol);
    ``name``: the one name of the EnvoyProxy, the Service and the Route."""
    opts = site["options"]["burst_routing"]
    return {
        "envoy_proxy": {"group": ENVOY_PROXY_GROUP, "kind": ENVOY_PROXY_KIND, "name": name},
        "service": {
            "name": name,
            "namespace": opts["burst_routing_envoy_gateway_namespace"],
            "type": "ClusterIP",
            "port": listener_port_name("HTTPS", gateway["port"]),
        },
        "route": {
            "name": name,
            "namespace": opts["burst_routing_envoy_gateway_namespace"],
            "host": gateway["hostname"],
            "termination": "passthrough",
            # a plain-HTTP request to the name gets no answer rather than a redirect: the front door speaks TLS
            "insecure": "None",
        },
    }
