"""relay.callback_urls: Relay POSTs completion notices only to https URLs of public hosts; every other
callback URL is refused with a message that says what is wrong and what is accepted."""

from __future__ import annotations

import socket
from collections.abc import Callable

import pytest

from relay.callback_urls import MAX_URL_LENGTH, CallbackUrlRefused, check_callback_url

PUBLIC_IP = "93.184.216.34"


def resolving_to(*addresses: str) -> Callable[[str, int], list[str]]:
    def resolve(host: str, port: int) -> list[str]:
        return list(addresses)

    return resolve


def unresolvable(host: str, port: int) -> list[str]:
    raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")


def refused(url: str, *, allow_loopback_http: bool = False, resolve: str | None = PUBLIC_IP) -> str:
    """The refusal message for `url` (the test fails if it is accepted)."""
    with pytest.raises(CallbackUrlRefused) as caught:
        check_callback_url(
            url,
            allow_loopback_http=allow_loopback_http,
            resolve=resolving_to(resolve) if resolve is not None else unresolvable,
        )
    return str(caught.value)


def test_an_https_url_of_a_public_host_is_returned_unchanged() -> None:
    url = "https://hooks.example.com:8443/relay/notices?tenant=t-1"
    seen: list[tuple[str, int]] = []

    def resolve(host: str, port: int) -> list[str]:
        seen.append((host, port))
        return [PUBLIC_IP, "2606:2800:220:1:248:1893:25c8:1946"]

    assert check_callback_url(url, resolve=resolve) == url
    assert seen == [("hooks.example.com", 8443)]


def test_the_default_port_is_resolved_for_https() -> None:
    seen: list[int] = []

    def resolve(host: str, port: int) -> list[str]:
        seen.append(port)
        return [PUBLIC_IP]

    check_callback_url("https://hooks.example.com/cb", resolve=resolve)
    assert seen == [443]


def test_a_public_ip_literal_is_accepted_without_resolving() -> None:
    url = f"https://{PUBLIC_IP}/cb"

    assert check_callback_url(url, resolve=unresolvable) == url


def test_http_is_refused_outside_the_sandbox_even_for_a_public_host() -> None:
    message = refused("http://hooks.example.com/cb")

    assert "uses http" in message and "https URL of a public host" in message


def test_http_loopback_is_refused_without_allow_loopback_http() -> None:
    assert "uses http" in refused("http://127.0.0.1:8080/cb")


def test_https_loopback_is_refused_without_allow_loopback_http() -> None:
    assert "127.0.0.1 is a loopback address" in refused("https://127.0.0.1/cb")


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://169.254.169.254/latest/meta-data/", "link-local"),
        ("https://10.0.3.7/admin", "private"),
        ("https://192.168.1.1/", "private"),
        ("https://172.16.0.1/", "private"),
        ("https://172.31.255.254/", "private"),
        ("https://100.64.0.1/", "shared address space 100.64.0.0/10"),
        ("https://100.127.255.254/", "shared address space"),
        ("https://0.0.0.0/", "unspecified"),
        ("https://224.0.0.1/", "multicast"),
        ("https://240.0.0.1/", "reserved"),
        ("https://192.0.2.10/", "not a public address"),  # documentation range
        ("https://[::1]/", "loopback"),
        ("https://[::]/", "unspecified"),
        ("https://[fe80::1]/", "link-local"),
        ("https://[fc00::1]/", "unique-local"),
        ("https://[fd12:3456::1]/", "unique-local"),
        ("https://[::ffff:10.0.0.1]/", "IPv6 form of 10.0.0.1, a private address"),
        ("https://[::ffff:169.254.169.254]/", "IPv6 form of 169.254.169.254, a link-local"),
        ("https://[::ffff:127.0.0.1]/", "IPv6 form of 127.0.0.1, a loopback"),
        ("https://[::10.0.0.1]/", "IPv6 form of 10.0.0.1"),  # IPv4-compatible (deprecated)
        ("https://[64:ff9b::a9fe:a9fe]/", "IPv6 form of 169.254.169.254"),  # NAT64
    ],
)
def test_an_address_that_is_not_public_is_refused_saying_which_kind(url: str, reason: str) -> None:
    message = refused(url)

    assert reason in message and "Relay never sends to" in message


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("10.1.2.3", "private"),
        ("169.254.169.254", "link-local"),
        ("127.0.0.1", "loopback"),
        ("fd00::5", "unique-local"),
        ("::ffff:192.168.0.9", "IPv6 form of 192.168.0.9"),
    ],
)
def test_a_host_name_resolving_to_an_address_that_is_not_public_is_refused(address: str, reason: str) -> None:
    message = refused("https://internal.example.com/cb", resolve=address)

    assert f"internal.example.com resolves to {address}" in message and reason in message


def test_a_host_name_with_one_private_address_among_public_ones_is_refused() -> None:
    # urllib may connect to any of them: one private address is enough to reach inside.
    with pytest.raises(CallbackUrlRefused, match=r"resolves to 10\.0\.0\.8, which is a private address"):
        check_callback_url("https://mixed.example.com/cb", resolve=resolving_to(PUBLIC_IP, "10.0.0.8"))


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://user:pass@hooks.example.com/cb", "credentials"),
        ("https://token@hooks.example.com/cb", "credentials"),
        ("https://hooks.example.com\\@169.254.169.254/cb", "credentials"),
        ("https://hooks.example.com/cb#done", "#fragment"),
        ("https://hooks.example.com/cb#", "#fragment"),
        ("https:///cb", "no host"),
        ("https://:443/cb", "no host"),
        ("hooks.example.com/cb", "scheme '(none)'"),
        ("ftp://hooks.example.com/cb", "scheme 'ftp'"),
        ("file:///etc/passwd", "scheme 'file'"),
        ("gopher://hooks.example.com/", "scheme 'gopher'"),
        ("https://hooks.example.com:99999/cb", "port"),
        ("https://[::1/cb", "cannot be parsed"),
        ("https://hooks.example.com/c b", "spaces, control or non-ASCII"),
        ("https://hooks.example.com/cb\n", "spaces, control or non-ASCII"),
        ("https://hooks.exämple.com/cb", "spaces, control or non-ASCII"),
    ],
)
def test_a_malformed_or_unsafe_url_is_refused_saying_what_is_wrong(url: str, reason: str) -> None:
    message = refused(url)

    assert reason in message and "use an https URL of a public host" in message


def test_a_url_longer_than_the_limit_is_refused() -> None:
    base = "https://hooks.example.com/"
    longest = base + "a" * (MAX_URL_LENGTH - len(base))

    assert check_callback_url(longest, resolve=resolving_to(PUBLIC_IP)) == longest
    assert "2,049 characters long, more than the 2,048" in refused(longest + "a")


def test_a_host_that_does_not_resolve_is_refused() -> None:
    message = refused("https://no-such-host.invalid/cb", resolve=None)

    assert "no-such-host.invalid does not resolve" in message and "Name or service not known" in message


def test_a_host_that_resolves_to_nothing_is_refused() -> None:
    with pytest.raises(CallbackUrlRefused, match="does not resolve to any address"):
        check_callback_url("https://empty.example.com/cb", resolve=resolving_to())


# the sandbox: fakes on 127.0.0.1 over plain http ------------------------------------------------


def test_sandbox_accepts_http_to_a_loopback_ip() -> None:
    url = "http://127.0.0.1:8080/cb"

    assert check_callback_url(url, allow_loopback_http=True, resolve=unresolvable) == url


def test_sandbox_accepts_http_to_localhost_resolving_to_loopback() -> None:
    url = "http://localhost:9/x"

    assert check_callback_url(url, allow_loopback_http=True, resolve=resolving_to("127.0.0.1", "::1")) == url


def test_sandbox_accepts_https_to_loopback_and_to_public_hosts() -> None:
    for url in ("https://127.0.0.1:8443/cb", "https://[::1]/cb", "https://hooks.example.com/cb"):
        resolve = resolving_to(PUBLIC_IP)
        assert check_callback_url(url, allow_loopback_http=True, resolve=resolve) == url


def test_sandbox_still_refuses_http_to_a_host_that_is_not_loopback() -> None:
    assert "not loopback (hooks.example.com)" in refused(
        "http://hooks.example.com/cb", allow_loopback_http=True
    )
    assert "not loopback (10.0.0.1)" in refused("http://10.0.0.1/cb", allow_loopback_http=True)


def test_sandbox_refuses_http_to_localhost_when_it_resolves_elsewhere() -> None:
    message = refused("http://localhost:9/x", allow_loopback_http=True, resolve="10.0.0.1")

    assert "resolves to 10.0.0.1, which is not loopback" in message


def test_sandbox_still_refuses_private_and_metadata_addresses() -> None:
    assert "link-local" in refused("https://169.254.169.254/", allow_loopback_http=True)
    assert "private" in refused("https://app.internal/", allow_loopback_http=True, resolve="10.0.0.1")


# -- the send connects to the vetted address -------------------------------------------------------


def test_the_send_dials_the_vetted_address_never_a_second_dns_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    # DNS rebinding: the check hears a public address, a second lookup (the connection's) would hear
    # 127.0.0.1. The send dials what was checked and never asks DNS again.
    from relay.callback_urls import vet_callback_url
    from relay.errors import DependencyUnavailable
    from relay.http import WebhookClient

    answers = iter([[PUBLIC_IP], ["127.0.0.1"]])
    lookups: list[str] = []

    def rebinding(host: str, port: int) -> list[str]:
        lookups.append(host)
        return next(answers)

    vetted = vet_callback_url("https://hooks.example.com/relay", resolve=rebinding)
    assert (vetted.url, vetted.address) == ("https://hooks.example.com/relay", PUBLIC_IP)

    dialled: list[tuple[str, int]] = []

    def create_connection(address: tuple[str, int], *args: object, **kwargs: object) -> None:
        dialled.append(address)
        raise ConnectionRefusedError("not dialled for real in a unit test")

    def getaddrinfo(*args: object, **kwargs: object) -> None:
        lookups.append(str(args[0]))
        raise AssertionError("the connection resolved the host again")

    monkeypatch.setattr(socket, "create_connection", create_connection)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    client = WebhookClient(vetted.url, timeout_seconds=1, what="the callback", connect_to=vetted.address)
    with pytest.raises(DependencyUnavailable, match="unreachable"):
        client.send({"operationId": "op-1"}, idempotency_key="op-1:notice")

    assert dialled == [(PUBLIC_IP, 443)]
    assert lookups == ["hooks.example.com"]  # one lookup, the check's: 127.0.0.1 was never heard


def test_without_a_vetted_address_the_connection_resolves_the_name_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The window the pinning closes: an unpinned send hands the NAME to the socket layer, which asks
    # DNS again (and would dial whatever it answers then).
    from relay.errors import DependencyUnavailable
    from relay.http import WebhookClient

    dialled: list[tuple[str, int]] = []

    def create_connection(address: tuple[str, int], *args: object, **kwargs: object) -> None:
        dialled.append(address)
        raise ConnectionRefusedError("not dialled for real in a unit test")

    monkeypatch.setattr(socket, "create_connection", create_connection)
    with pytest.raises(DependencyUnavailable):
        WebhookClient("https://hooks.example.com/relay", timeout_seconds=1, what="the callback").send(
            {"operationId": "op-1"}, idempotency_key="op-1:notice"
        )
    assert dialled == [("hooks.example.com", 443)]


def test_the_vetted_address_is_the_first_of_the_checked_answers_and_a_literal_is_itself() -> None:
    from relay.callback_urls import vet_callback_url

    assert (
        vet_callback_url("https://h.example.com/", resolve=resolving_to(PUBLIC_IP, "1.1.1.1")).address
        == PUBLIC_IP
    )
    with pytest.raises(CallbackUrlRefused, match="private"):
        vet_callback_url("https://h.example.com/", resolve=resolving_to(PUBLIC_IP, "10.0.0.1"))
    sandbox = vet_callback_url("http://127.0.0.1:8080/n", allow_loopback_http=True)
    assert sandbox.address == "127.0.0.1"
