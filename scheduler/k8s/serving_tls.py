"""The serving port's TLS: a mounted certificate and key when given (a Secret of type
kubernetes.io/tls), else a self-signed certificate made at start, as kube-scheduler
makes one when no ``--tls-cert-file`` is given (its clients, a kubelet's probes and
Prometheus with ``insecureSkipVerify``, do not verify it; a mounted one can be).

The self-signed key is ECDSA P-256 (``cryptography``; the images have no ``openssl``),
valid for a year, for ``localhost``, 127.0.0.1, ::1 and the host's name; it lives in
memory and in a file under the temporary folder only while it is loaded.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import socket
import ssl
import tempfile
from pathlib import Path

from scheduler.errors import SchedulerInputError

SELF_SIGNED_DAYS = 365


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
