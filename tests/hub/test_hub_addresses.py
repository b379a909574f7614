"""Who listens on the hub's port, on which address (classroom/hub/addresses.py): what make hub's refusal and its
check after start go by. A learner squatting a running hub's port: tests/hub/test_hub.py."""

from __future__ import annotations

import os
import socket

import pytest

from classroom.hub import addresses


def _listen(family: int, address: str, port: int = 0, v6only: bool = True) -> socket.socket:
    s = socket.socket(family, socket.SOCK_STREAM)
    if family == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, int(v6only))
    s.bind((address, port))
    s.listen(1)
    return s


needs_ipv6 = pytest.mark.skipif(not addresses.has_ipv6(), reason="this machine has no IPv6 loopback")


def test_a_localhost_hub_holds_both_loopbacks():
    wanted = addresses.hub_addresses("http://localhost:8000", 8000)
    assert wanted == (["::1", "127.0.0.1"] if addresses.has_ipv6() else ["127.0.0.1"])
    assert addresses.hub_addresses("https://hub.example.edu", 8000) == wanted  # a TLS front end on another port


@needs_ipv6
@pytest.mark.parametrize("address,v6only", [("::1", True), ("::", True), ("::", False)])
def test_a_listener_on_an_ipv6_address_alone_is_found_with_its_process(address, v6only):
    with _listen(socket.AF_INET6, address, v6only=v6only) as s:
        port = s.getsockname()[1]
        found = addresses.listeners(port)
        assert [(x.address, x.pid) for x in found] == [(address, os.getpid())], found
        assert f"process {os.getpid()} of " in found[0].named() and f"[{address}]:{port}" in found[0].named()
        assert not addresses.bindable_everywhere(port)
        assert addresses.strangers(port, {os.getpid()}) == []
        # the hub's proxy holds each address itself: a wildcard is no proxy's, and counts for no address
        assert addresses.unheld(port, ["::1", "127.0.0.1"], {os.getpid()}) == (
            ["127.0.0.1"] if address == "::1" else ["::1", "127.0.0.1"])


def test_a_listener_on_ipv4_alone_leaves_ipv6_unheld():
    with _listen(socket.AF_INET, "127.0.0.1") as s:
        port = s.getsockname()[1]
        assert [x.address for x in addresses.listeners(port)] == ["127.0.0.1"]
        missing = addresses.unheld(port, addresses.hub_addresses("http://localhost", port), {os.getpid()})
        assert missing == (["::1"] if addresses.has_ipv6() else [])
    assert addresses.listeners(port) == []
