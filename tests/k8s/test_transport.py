"""The TLS settings the HTTP/1.1 transport takes from a Configuration (its route,
proxies included, is tested in tests/k8s/test_blocking.py; the requests themselves
against an API server: tests/e2e/test_api_writes.py)."""

import asyncio
import socket
import ssl
from typing import Any

import pytest
from kubernetes import client

from scheduler.k8s.client.transport import ApiTransport, ssl_context


def configuration(**fields: Any) -> client.Configuration:
    config = client.Configuration(host="https://127.0.0.1:6443")
    for name, value in fields.items():
        setattr(config, name, value)
    return config


@pytest.mark.parametrize(
    ("fields", "check_hostname", "verify_mode"),
    [
        ({}, True, ssl.CERT_REQUIRED),
        ({"assert_hostname": False}, False, ssl.CERT_REQUIRED),
        ({"verify_ssl": False}, False, ssl.CERT_NONE),
    ],
)
def test_tls_settings_follow_the_configuration(
    fields: dict[str, Any], check_hostname: bool, verify_mode: ssl.VerifyMode
) -> None:
    context = ssl_context(configuration(**fields))
    assert (context.check_hostname, context.verify_mode) == (check_hostname, verify_mode)


def test_a_connection_mid_handshake_offers_no_session_to_resume() -> None:
    context = ssl_context(configuration(verify_ssl=False))
    first = context.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_hostname="127.0.0.1")
    with pytest.raises(ssl.SSLWantReadError):
        first.do_handshake()  # its ClientHello is out; no answer yet
    assert context.resumable_session() is None  # nothing handed in: no connection is looked at
    context.remember(first)
    assert context.resumable_session() is None  # no ticket yet
    second = context.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_hostname="127.0.0.1")
    assert second.session is None


def test_warming_a_server_that_refuses_the_connection_leaves_it_to_the_first_write() -> None:
    """Nothing listens at the address: ``warm`` returns quietly, with no connection."""
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    transport = ApiTransport(client.ApiClient(configuration(host=f"https://127.0.0.1:{port}")), 4)

    async def body() -> None:
        await transport.warm()
        assert transport.pool.idle == ()
        assert transport.pool.open == 0

    asyncio.run(body())
