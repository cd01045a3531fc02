"""Decide from an endpoint's address whether it is local (scoring mode) and on this machine."""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

import psutil

_TAILSCALE_V4 = ipaddress.ip_network("100.64.0.0/10")
_LOCAL_SUFFIXES = (".local", ".lan", ".internal", ".home.arpa", ".localdomain", ".ts.net")
_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", ""}


@dataclass(frozen=True)
class Locality:
    """``scoring_local``: local curve; ``same_machine``: this machine's hardware may be claimed."""

    host: str
    scoring_local: bool
    same_machine: bool
    reason: str


def endpoint_host(url: str) -> str:
    return (urlsplit(url if "://" in url else f"http://{url}").hostname or "").lower()


def classify(url: str, *, override: str | None = None) -> Locality:
    """Classify an endpoint URL.

    Local scoring covers loopback, RFC 1918 and other private/link-local ranges, Tailscale's
    100.64.0.0/10 and ``*.ts.net``, single-label host names and home-network suffixes. Hardware is
    attributed only when the host is this machine (loopback or one of its own addresses).
    ``override`` ("local"/"remote") forces the scoring mode, never the hardware attribution.
    """
    host = endpoint_host(url)
    same = _is_this_machine(host)
    local, reason = _scoring_local(host)
    if override in ("local", "remote"):
        local, reason = override == "local", f"forced --{override}"
    return Locality(host=host, scoring_local=local, same_machine=same, reason=reason)


def _scoring_local(host: str) -> tuple[bool, str]:
    if host in _LOOPBACK_NAMES:
        return True, "loopback name"
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        if host.endswith(_LOCAL_SUFFIXES):
            return True, "local network name"
        if "." not in host:
            return True, "single-label host name"
        return False, "public host name"
    if ip.is_loopback:
        return True, "loopback address"
    if ip.version == 4 and ip in _TAILSCALE_V4:
        return True, "Tailscale address"
    if ip.is_private or ip.is_link_local:
        return True, "private address"
    return False, "public address"


def _is_this_machine(host: str) -> bool:
    if host in _LOOPBACK_NAMES:
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        # Our own host name counts; other names would need DNS, which we do not trust for this.
        return host in {socket.gethostname().lower(), socket.getfqdn().lower()}
    if ip.is_loopback or ip.is_unspecified:
        return True
    own = {
        addr.address.split("%")[0]
        for addrs in psutil.net_if_addrs().values()
        for addr in addrs
        if addr.family in (socket.AF_INET, socket.AF_INET6)
    }
    return str(ip) in own
