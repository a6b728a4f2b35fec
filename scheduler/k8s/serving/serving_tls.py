"""The serving port's TLS: a mounted certificate and key when given (a Secret of type
kubernetes.io/tls), else a self-signed certificate made at start, as kube-scheduler
makes one when no ``--tls-cert-file`` is given (its clients, a kubelet's probes and
Prometheus with ``insecureSkipVerify``, do not verify it; a mounted one can be).

A mounted pair is read again when its files change (a Secret rotated by cert-manager or
by hand: the kubelet swaps the volume's files), as kube-scheduler's dynamic serving
certificate is: ``ServingCertificate.context`` looks at the files' identity (inode,
size, modification time) at most every ``RECHECK_S`` when a connection arrives, and a
pair that fails to load (a half-written rotation) keeps the last good one, logged.

The self-signed key is ECDSA P-256 (``cryptography``; the images have no ``openssl``),
valid for a year, for ``localhost``, 127.0.0.1, ::1 and the host's name; it lives in
memory and in a file under the temporary folder only while it is loaded.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import logging
import os
import socket
import ssl
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from scheduler.errors import SchedulerInputError

log = logging.getLogger(__name__)
SELF_SIGNED_DAYS = 365
# How often, at most, a mounted pair's files are looked at again.
RECHECK_S = 10.0


class TlsError(SchedulerInputError):
    """A mounted certificate or key that cannot be loaded."""


def server_context(cert_file: Path | None = None, key_file: Path | None = None) -> ssl.SSLContext:
    """A server-side context, TLS 1.2 or later, with ``cert_file`` and ``key_file``
    (both or neither; neither: self-signed)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert_file is None and key_file is None:
        certificate, key = self_signed(socket.gethostname())
        # load_cert_chain reads files only: written with 0600 and removed at once.
        with tempfile.TemporaryDirectory(prefix="rl-scheduler-tls-") as folder:
            path = Path(folder) / "serving.pem"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(key + certificate)
            context.load_cert_chain(path)
        return context
    if cert_file is None or key_file is None:
        raise TlsError("settings", "serving.tls_cert_file", "tls_cert_file and tls_key_file go together")
    try:
        context.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as error:
        raise TlsError(str(cert_file), "tls_cert_file", f"cannot load with {key_file}: {error}") from None
    return context


def _identity(path: Path) -> tuple[int, int, int]:
    stat = path.stat()
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


class ServingCertificate:
    """The serving port's TLS context, current with the mounted files (see the module)."""

    def __init__(
        self,
        cert_file: Path | None = None,
        key_file: Path | None = None,
        recheck_s: float = RECHECK_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cert_file, self.key_file = cert_file, key_file
        self.recheck_s, self.clock = recheck_s, clock
        self._context = server_context(cert_file, key_file)
        self._identity = self._files()
        self._checked = clock()
        self.reloads = 0

    def _files(self) -> tuple[tuple[int, int, int], ...] | None:
        if self.cert_file is None or self.key_file is None:
            return None
        try:
            return _identity(self.cert_file), _identity(self.key_file)
        except OSError:
            return None

    def context(self) -> ssl.SSLContext:
        """The context for a new connection, the files re-read if they changed."""
        if self.cert_file is None or self.clock() - self._checked < self.recheck_s:
            return self._context
        self._checked = self.clock()
        identity = self._files()
        if identity is None or identity == self._identity:
            return self._context
        try:
            self._context = server_context(self.cert_file, self.key_file)
        except TlsError as error:
            log.warning("serving certificate not reloaded, the last one stays: %s", error)
            return self._context
        self._identity = identity
        self.reloads += 1
        log.info("serving certificate reloaded from %s", self.cert_file)
        return self._context


def self_signed(hostname: str, days: int = SELF_SIGNED_DAYS) -> tuple[bytes, bytes]:
    """(certificate, private key), PEM: a self-signed serving certificate."""
    from cryptography import x509  # noqa: PLC0415 - only the self-signed default needs it
    from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415
    from cryptography.x509.oid import NameOID  # noqa: PLC0415

    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    # kube's self-signed serving certificates are named <host>@<unix time>.
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{hostname}@{int(now.timestamp())}")])
    names: list[x509.GeneralName] = [x509.DNSName("localhost")]
    if hostname and hostname != "localhost":
        names.append(x509.DNSName(hostname))
    names += [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.IPAddress(ipaddress.ip_address("::1"))]
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return certificate.public_bytes(serialization.Encoding.PEM), key_pem
