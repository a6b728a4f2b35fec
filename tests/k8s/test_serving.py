"""The serving port on a local socket: HTTPS with the self-signed or a mounted
certificate, 401/403/200 by delegated authentication (the API server is a table here,
a real one in tests/e2e/test_serving.py), and what one client can hold: 2,000 idle
connections leave /healthz answered, a silent connection and an unread answer are
closed after their timeouts."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import resource
import socket
import ssl
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from scheduler.k8s.process.operator import only_failure
from scheduler.k8s.process.settings import ServingSettings
from scheduler.k8s.serving.delegated_auth import DelegatedAuth
from scheduler.k8s.serving.http import Answer, Route, build_routes
from scheduler.k8s.serving.metrics import Metrics
from scheduler.k8s.serving.serving import (
    Certificate,
    Server,
    ServingAddressError,
    raise_open_files_limit,
    serve,
    serving_certificate,
)
from scheduler.k8s.serving.serving_tls import ServingCertificate, TlsError, self_signed, server_context
from scheduler.online.trainer import scheduler_request
from tests.k8s.test_delegated_auth import FakeApiServer

UNVERIFIED = ssl._create_unverified_context()  # a probe's and insecureSkipVerify's TLS


def get(
    port: int, path: str, token: str | None = None, tls: ssl.SSLContext | None = UNVERIFIED
) -> tuple[int, bytes]:
    if tls is None:
        connection: http.client.HTTPConnection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    else:
        connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=tls)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        connection.request("GET", path, headers=headers)
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


@contextlib.asynccontextmanager
async def serving(
    routes: dict[str, Route],
    limits: ServingSettings,
    ssl_context: ssl.SSLContext | Certificate | None = None,
) -> AsyncIterator[tuple[int, Server]]:
    server = Server(routes, ssl_context or server_context(), DelegatedAuth(FakeApiServer().review), limits)
    listening = await asyncio.start_server(server.on_connection, "127.0.0.1", 0, backlog=4096)
    try:
        yield listening.sockets[0].getsockname()[1], server
    finally:
        listening.close()
        await listening.wait_closed()


def in_thread(function: Callable[..., Any], *args: Any) -> Any:
    return asyncio.to_thread(function, *args)


def routes() -> dict[str, Route]:
    metrics = Metrics()
    metrics.is_leader.set(1)
    return build_routes(metrics, lambda: (True, "ok"), lambda: (True, "ok"))


def test_https_with_delegated_authentication() -> None:
    async def main() -> list[tuple[int, bytes]]:
        async with serving(routes(), ServingSettings()) as (port, _):
            return [
                await in_thread(get, port, "/healthz"),
                await in_thread(get, port, "/readyz"),
                await in_thread(get, port, "/metrics"),
                await in_thread(get, port, "/metrics", "forged"),
                await in_thread(get, port, "/metrics", "stranger-token"),
                await in_thread(get, port, "/metrics", "reader-token"),
                await in_thread(get, port, "/nowhere"),
            ]

    seen = asyncio.run(main())
    assert [status for status, _ in seen] == [200, 200, 401, 401, 403, 200, 401]
    assert b"\nrl_scheduler_leader 1.0\n" in seen[5][1]


def test_plain_http_to_the_https_port_gets_nothing() -> None:
    async def main() -> None:
        async with serving(routes(), ServingSettings()) as (port, _):
            with pytest.raises((http.client.HTTPException, OSError)):
                await in_thread(get, port, "/healthz", None, None)

    asyncio.run(main())


def test_a_mounted_certificate_is_served_and_verifies(tmp_path: Path) -> None:
    certificate, key = self_signed("rl-scheduler.example")
    (tmp_path / "tls.crt").write_bytes(certificate)
    (tmp_path / "tls.key").write_bytes(key)
    verifying = ssl.create_default_context(cafile=str(tmp_path / "tls.crt"))  # 127.0.0.1 is in its names

    async def main() -> tuple[int, bytes]:
        context = server_context(tmp_path / "tls.crt", tmp_path / "tls.key")
        async with serving(routes(), ServingSettings(), context) as (port, _):
            return await in_thread(get, port, "/healthz", None, verifying)

    assert asyncio.run(main()) == (200, b"ok")


def test_a_rotated_certificate_is_served_to_new_connections_and_a_broken_one_is_not(tmp_path: Path) -> None:
    def mount(certificate: bytes, key: bytes) -> ssl.SSLContext:
        # As the kubelet swaps a Secret's files: new files renamed over the old.
        for name, data in (("tls.crt", certificate), ("tls.key", key)):
            (tmp_path / f"{name}.new").write_bytes(data)
            (tmp_path / f"{name}.new").rename(tmp_path / name)
        return ssl.create_default_context(cadata=certificate.decode())

    first = mount(*self_signed("first"))
    mounted = ServingCertificate(tmp_path / "tls.crt", tmp_path / "tls.key", recheck_s=0.0)

    async def main() -> list[int | str]:
        seen: list[int | str] = []
        async with serving(routes(), ServingSettings(), mounted) as (port, _):
            seen.append((await in_thread(get, port, "/healthz", None, first))[0])
            second = mount(*self_signed("second"))
            seen.append((await in_thread(get, port, "/healthz", None, second))[0])
            certificate, _ = self_signed("third")
            (tmp_path / "tls.crt").write_bytes(certificate)  # half a rotation: its key is not there
            seen.append((await in_thread(get, port, "/healthz", None, second))[0])
            try:
                await in_thread(get, port, "/healthz", None, first)
            except ssl.SSLCertVerificationError:
                seen.append("first refused")
        return seen

    assert asyncio.run(main()) == [200, 200, 200, "first refused"]
    assert mounted.reloads == 1


def test_a_certificate_that_does_not_load_is_named(tmp_path: Path) -> None:
    certificate, _ = self_signed("a")
    _, other_key = self_signed("b")
    (tmp_path / "tls.crt").write_bytes(certificate)
    (tmp_path / "tls.key").write_bytes(other_key)
    with pytest.raises(TlsError, match=r"tls\.crt: tls_cert_file: cannot load"):
        server_context(tmp_path / "tls.crt", tmp_path / "tls.key")


def test_the_self_signed_certificate_is_made_when_due_and_a_probe_before_waits_for_it() -> None:
    """``rl-scheduler run`` listens at once and makes its self-signed certificate later
    (``serving_certificate``): a probe that comes first is answered once it is made."""

    async def main() -> tuple[bool, tuple[int, bytes], bool]:
        due = asyncio.Event()
        certificate = await serving_certificate(ServingSettings(), due.wait)
        assert isinstance(certificate, asyncio.Task)
        async with serving(routes(), ServingSettings(), certificate) as (port, _):
            probe = asyncio.ensure_future(in_thread(get, port, "/healthz"))
            await asyncio.sleep(0.3)
            waited = not probe.done() and not certificate.done()
            due.set()
            return waited, await probe, certificate.done()

    assert asyncio.run(main()) == (True, (200, b"ok"), True)


@pytest.mark.parametrize(
    ("due", "made_at_once"),
    [
        pytest.param(None, True, id="no due: made now (the trainer)"),
        pytest.param("later", False, id="made later"),
    ],
)
def test_a_mounted_pair_is_read_at_once_whatever_is_due(
    tmp_path: Path, due: str | None, made_at_once: bool
) -> None:
    certificate, key = self_signed("rl-scheduler.example")
    (tmp_path / "tls.crt").write_bytes(certificate)
    (tmp_path / "tls.key").write_bytes(key)
    mounted = ServingSettings(tls_cert_file=tmp_path / "tls.crt", tls_key_file=tmp_path / "tls.key")

    async def main() -> tuple[bool, bool]:
        never = asyncio.Event().wait
        got = await serving_certificate(mounted, never if due else None)
        alone = await serving_certificate(ServingSettings(), never if due else None)
        made = isinstance(alone, ServingCertificate)
        if isinstance(alone, asyncio.Task):
            alone.cancel()
        return isinstance(got, ServingCertificate) and got.cert_file == tmp_path / "tls.crt", made

    assert asyncio.run(main()) == (True, made_at_once)


def test_a_self_signed_certificate_that_cannot_be_made_stops_the_watch() -> None:
    """``only_failure`` ends with the certificate's error; a certificate that is made
    leaves it waiting (the operator stops on the first, never on the second)."""

    async def fails() -> None:
        raise OSError("read-only file system")

    async def main() -> tuple[bool, str]:
        good = asyncio.create_task(asyncio.sleep(0))
        watching = asyncio.create_task(only_failure(good))
        await asyncio.sleep(0.05)
        still = not watching.done()
        watching.cancel()
        try:
            await only_failure(asyncio.create_task(fails()))
        except OSError as error:
            return still, str(error)
        return still, ""

    assert asyncio.run(main()) == (True, "read-only file system")


def test_two_thousand_idle_connections_leave_the_probes_answered() -> None:
    assert raise_open_files_limit() > 2000 + 256 + 100, "this test needs the open-files limit raised"
    limits = ServingSettings(max_connections=256)

    async def main() -> tuple[list[int], int]:
        async with serving(routes(), limits) as (port, server):
            idle = await in_thread(open_idle, port, 2000)
            try:
                statuses = [(await in_thread(get, port, "/healthz"))[0] for _ in range(5)]
                statuses.append((await in_thread(get, port, "/metrics", "reader-token"))[0])
                return statuses, len(server.table)
            finally:
                for sock in idle:
                    sock.close()

    statuses, open_connections = asyncio.run(main())
    assert statuses == [200] * 6
    assert open_connections <= 256


def open_idle(port: int, count: int) -> list[socket.socket]:
    """``count`` TCP connections to the port that never send a byte."""
    opened = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        opened.append(sock)
    return opened


def test_a_silent_connection_is_closed_after_the_read_timeout() -> None:
    limits = ServingSettings(read_timeout_s=0.3)

    async def main() -> tuple[bytes, float]:
        async with serving(routes(), limits) as (port, _):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            started = time.monotonic()
            data = await asyncio.wait_for(reader.read(), 5)  # EOF when the server closes
            writer.close()
            return data, time.monotonic() - started

    data, waited = asyncio.run(main())
    assert data == b""
    assert 0.2 < waited < 3


def test_an_answer_the_client_does_not_read_is_dropped_after_the_write_timeout() -> None:
    big = {"/healthz": lambda: Answer(200, b"x" * (64 << 20))}
    limits = ServingSettings(write_timeout_s=0.3)

    async def main() -> int:
        async with serving(big, limits) as (port, server):
            tls = await asyncio.to_thread(lambda: UNVERIFIED)
            _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=tls)
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            await writer.drain()
            await asyncio.sleep(2)  # never read: the server gives up on the answer
            left = len(server.table)
            writer.transport.abort()
            return left

    assert asyncio.run(main()) == 0


def test_plain_serve_for_tests_has_no_tls_and_no_authentication() -> None:
    async def main() -> tuple[int, bytes]:
        server = await serve(routes(), "127.0.0.1:0", ssl_context=None, auth=None)
        port = server.sockets[0].getsockname()[1]
        try:
            return await in_thread(get, port, "/metrics", None, None)
        finally:
            server.close()
            await server.wait_closed()

    assert asyncio.run(main())[0] == 200


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("127.0.0.1:{taken}", "cannot listen on 127.0.0.1:{taken}: Address already in use"),
        ("192.0.2.1:10259", "cannot listen on 192.0.2.1:10259: Cannot assign requested address"),
    ],
    ids=["the port taken", "an address this host does not have"],
)
def test_an_address_that_cannot_be_listened_on_names_the_setting(address: str, problem: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        with pytest.raises(ServingAddressError) as raised:
            asyncio.run(serve(routes(), address.format(taken=port), ssl_context=None, auth=None))
    assert str(raised.value) == f"settings: metrics_address: {problem.format(taken=port)}"


def test_the_open_files_limit_is_raised_to_the_hard_one() -> None:
    raise_open_files_limit()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert soft == hard


def test_the_trainer_sends_its_token_file_and_trusts_the_loopback(tmp_path: Path) -> None:
    """The trainer reads the scheduler's metrics with the pod's token file."""
    (tmp_path / "token").write_text("abc\n")
    request, context = scheduler_request("https://127.0.0.1:10259/metrics", tmp_path / "token")
    assert request.get_header("Authorization") == "Bearer abc"
    assert context is not None
    assert context.verify_mode.name == "CERT_NONE"  # the loopback: the self-signed certificate
    _, remote = scheduler_request("https://rl-scheduler.example:10259/metrics", None)
    assert remote is not None
    assert remote.verify_mode.name == "CERT_REQUIRED"
