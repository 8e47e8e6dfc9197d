"""The SSRF guard on client-supplied callback URLs (where Relay POSTs a signed completion notice).

A callback URL comes from a client, yet Relay's own Lambda sends the request, from inside the VPC and
with the function's network position: without a check, ``callbackUrl=http://169.254.169.254/...``
makes Relay fetch the instance metadata endpoint, and ``https://10.0.3.7/admin`` reaches a private
service no client could reach itself. ``check_callback_url`` accepts an https URL of a host whose every
address is public, and refuses anything else with a message fit for a 400 field error.

It is called twice: when the operation is accepted (the client learns at once that its URL will never
be used) and again before each send, because DNS can change in between (a name that resolved to a
public address at accept time can point at 10.0.0.1 an hour later). The send then connects to the
address this check vetted (``vet_callback_url`` -> ``VettedCallback.address``, ``relay.http``'s
``connect_to``), never resolving the name again: DNS rebinding (a public answer to the check, a
private one to the connection) has no second answer to give. TLS still verifies the URL's host name
(SNI and the certificate), so pinning the address changes where the request goes, not whom it trusts.
Redirects never widen it: ``relay.http`` does not follow them, so a checked URL cannot 302 the request
to the metadata endpoint.
In the sandbox (``allow_loopback_http=True``) the fakes listen on 127.0.0.1 over plain http, so http
is accepted there for a loopback host only, and loopback addresses are not refused.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

MAX_URL_LENGTH = 2048

Resolver = Callable[[str, int], list[str]]
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_PRIVATE = tuple(ipaddress.ip_network(net) for net in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))
_SHARED_ADDRESS_SPACE = ipaddress.ip_network("100.64.0.0/10")  # RFC 6598 carrier-grade NAT
_UNIQUE_LOCAL = ipaddress.ip_network("fc00::/7")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated ::a.b.c.d; :: and ::1 are checked first
# RFC 6052 NAT64: with DNS64 and a NAT gateway (both AWS features), 64:ff9b::a00:1 reaches 10.0.0.1.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")

_ACCEPTED = "an https URL of a public host, e.g. https://hooks.example.com/relay"
_ACCEPTED_SANDBOX = f"{_ACCEPTED} (http only for a loopback host: 127.0.0.0/8, ::1 or localhost)"


@dataclass(frozen=True)
class VettedCallback:
    """A callback URL and the address its host had when it was checked: connect to that one."""

    url: str
    address: str


class CallbackUrlRefused(ValueError):
    """A callback URL Relay will not send to; the message says why and what is accepted."""


class CallbackUrlUnresolved(CallbackUrlRefused):
    """The host does not resolve (now). Refused when a client offers the URL; when a notice is due, a
    DNS failure may pass, so the sender retries it instead of parking."""


def default_resolve(host: str, port: int) -> list[str]:
    """The host's addresses, as urllib's own connection would find them (``socket.getaddrinfo``)."""
    return [str(info[4][0]) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)]


def check_callback_url(
    url: str,
    *,
    allow_loopback_http: bool = False,
    resolve: Resolver | None = None,
    resolve_host: bool = True,
) -> str:
    """`url` unchanged when Relay may POST to it; ``CallbackUrlRefused`` otherwise.

    `allow_loopback_http` is for the sandbox only (see the module docstring); `resolve(host, port)`
    returns the host's addresses (default: ``default_resolve``; tests pass a fake). ``resolve_host=False``
    checks everything but what DNS says of a host name (literal addresses are still checked): what an
    API does when it accepts a URL, so that its answer depends on the request alone; the sender checks
    again, DNS included, before each send.
    """
    return _vet(url, allow_loopback_http, resolve, resolve_host)[0]


def vet_callback_url(
    url: str, *, allow_loopback_http: bool = False, resolve: Resolver | None = None
) -> VettedCallback:
    """As ``check_callback_url`` (DNS included), with the vetted address to connect to: the first the
    host resolved to (every one of them was checked)."""
    checked, addresses = _vet(url, allow_loopback_http, resolve, True)
    return VettedCallback(checked, str(addresses[0]))


def _vet(
    url: str, allow_loopback_http: bool, resolve: Resolver | None, resolve_host: bool
) -> tuple[str, list[IPAddress]]:
    accepted = _ACCEPTED_SANDBOX if allow_loopback_http else _ACCEPTED
    if len(url) > MAX_URL_LENGTH:
        raise CallbackUrlRefused(
            f"the callback URL is {len(url):,} characters long, more than the {MAX_URL_LENGTH:,} "
            f"accepted; use {accepted}."
        )
    # urlsplit silently drops tabs and newlines (and http.client refuses control characters at send
    # time): refuse them here so the URL checked is the URL sent.
    if not url.isascii() or any(ch <= " " or ch == "\x7f" for ch in url):
        raise CallbackUrlRefused(
            "the callback URL contains spaces, control or non-ASCII characters; percent-encode the path "
            f"and query, write the host in ASCII (punycode), and use {accepted}."
        )
    parts = _split(url, accepted)
    scheme = parts.scheme.lower()
    if scheme not in ("https", "http"):
        raise CallbackUrlRefused(
            f"the callback URL uses scheme {scheme or '(none)'!r}; only https is accepted: use {accepted}."
        )
    if "@" in parts.netloc:
        raise CallbackUrlRefused(
            "the callback URL carries credentials (user:password@host), which would be sent with every "
            "notice; remove them (each notice is signed instead, so the receiver can verify it) and use "
            f"{accepted}."
        )
    if "#" in url:
        raise CallbackUrlRefused(
            "the callback URL has a #fragment, which is never sent to a server; remove it and use "
            f"{accepted}."
        )
    host = parts.hostname
    if not host:
        raise CallbackUrlRefused(f"the callback URL has no host; use {accepted}.")
    port = _port(parts, accepted) or (443 if scheme == "https" else 80)
    literal = _literal_address(host)
    loopback_name = host.rstrip(".") == "localhost"
    if scheme == "http" and not (
        allow_loopback_http and (loopback_name or (literal is not None and _is_loopback(literal)))
    ):
        raise CallbackUrlRefused(
            f"the callback URL uses http; notices are sent over https only: use {accepted}."
            if not allow_loopback_http
            else f"the callback URL uses http for a host that is not loopback ({host}); use {accepted}."
        )
    if literal is None and not resolve_host:
        if loopback_name and not allow_loopback_http:
            raise CallbackUrlRefused(f"the callback URL's host {host} is loopback; use {accepted}.")
        return url, []
    addresses = (
        [literal] if literal is not None else _resolve(host, port, resolve or default_resolve, accepted)
    )
    for address in addresses:
        if allow_loopback_http and _is_loopback(address):
            continue
        if scheme == "http":  # only a loopback host may be reached over http, whatever its name says
            raise CallbackUrlRefused(
                f"the callback URL's host {host} resolves to {address}, which is not loopback, over http; "
                f"use {accepted}."
            )
        reason = _not_public(address)
        if reason is not None:
            resolved = "is" if literal is not None else f"resolves to {address}, which is"
            raise CallbackUrlRefused(
                f"the callback URL's host {host} {resolved} {reason}, which Relay never sends to; use "
                f"{accepted}."
            )
    return url, addresses


def _split(url: str, accepted: str) -> SplitResult:
    try:
        return urlsplit(url)
    except ValueError as exc:  # e.g. an unbalanced "[" in an IPv6 host
        raise CallbackUrlRefused(f"the callback URL cannot be parsed ({exc}); use {accepted}.") from exc


def _port(parts: SplitResult, accepted: str) -> int | None:
    try:
        return parts.port
    except ValueError as exc:  # not a number, or outside 0-65535
        raise CallbackUrlRefused(
            f"the callback URL's port is not a number from 1 to 65535; use {accepted}."
        ) from exc


def _literal_address(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None  # a name (or a legacy form like 0x7f.1, which getaddrinfo turns into an address)


def _resolve(host: str, port: int, resolve: Resolver, accepted: str) -> list[IPAddress]:
    what = f"the callback URL's host {host} does not resolve"
    try:
        found = resolve(host, port)
    except socket.gaierror as exc:
        raise CallbackUrlUnresolved(
            f"{what} ({exc.strerror or exc}); use a host name with a public DNS record, e.g. "
            "https://hooks.example.com/relay."
        ) from exc
    except UnicodeError as exc:  # the IDNA codec refuses the name (a label over 63 characters, ...)
        raise CallbackUrlRefused(
            f"the callback URL's host is not a valid host name ({exc}); use {accepted}."
        ) from exc
    if not found:
        raise CallbackUrlUnresolved(f"{what} to any address; use a host name with a public DNS record.")
    # A resolver's IPv6 answer may carry a zone ("fe80::1%eth0"): ip_address keeps it, still link-local.
    return [ipaddress.ip_address(address) for address in found]


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one reaches in the end (mapped, compatible or NAT64), if any."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64 or (address in _IPV4_COMPATIBLE and int(address) > 1):  # not :: or ::1
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def _is_loopback(address: IPAddress) -> bool:
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            return embedded.is_loopback
    return address.is_loopback


def _not_public(address: IPAddress) -> str | None:
    """Why `address` is not a public address Relay may send to, or None when it is."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            reason = _not_public(embedded)
            return None if reason is None else f"an IPv6 form of {embedded}, {reason}"
        if address in _UNIQUE_LOCAL:
            return "a unique-local IPv6 address (fc00::/7)"
    # The order picks the most telling name; the last test catches every other non-global range
    # (documentation, benchmarking, 192.0.0.0/24, ...).
    if address.is_unspecified:
        return "the unspecified address"
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address (the range of the instance metadata endpoint 169.254.169.254)"
    if address.is_multicast:
        return "a multicast address"
    if isinstance(address, ipaddress.IPv4Address) and address in _SHARED_ADDRESS_SPACE:
        return "in the shared address space 100.64.0.0/10 (carrier-grade NAT)"
    # Not ``is_private``: it also covers the documentation and reserved ranges, under a misleading name.
    if isinstance(address, ipaddress.IPv4Address) and any(address in net for net in _PRIVATE):
        return "a private address (RFC 1918)"
    if address.is_reserved:
        return "a reserved address"
    if not address.is_global:
        return "not a public address"
    return None
