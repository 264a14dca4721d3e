"""Constants and helpers the Kubernetes tests share (imported by conftest and the tests)."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml

TOKEN = "rgt-test-token"
IMAGE = "registry.example.com/team/train@sha256:" + "ab" * 32


def write_kubeconfig(path: Path, server: str, *, token: str = TOKEN, namespace: str = "ml",
                     context: str = "fake", user: dict | None = None,
                     ca: bytes | None = None) -> Path:
    cluster = {"server": server}
    if ca:
        cluster["certificate-authority-data"] = base64.b64encode(ca).decode()
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": context,
        "clusters": [{"name": "fake-cluster", "cluster": cluster}],
        "users": [{"name": "alice", "user": user or {"token": token}}],
        "contexts": [{"name": context, "context": {"cluster": "fake-cluster", "user": "alice",
                                                   "namespace": namespace}}],
    }))
    return path


def make_tls(where: Path) -> tuple[Path, Path, bytes]:
    """A CA and a server certificate for 127.0.0.1 (kubectl sends no token over plain HTTP):
    (server cert file, server key file, CA PEM)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    def name(text: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(name("rgt-fake-ca")).issuer_name(
        name("rgt-fake-ca")).public_key(ca_key.public_key()).serial_number(1)
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(name("kube-apiserver")).issuer_name(
        ca.subject).public_key(key.public_key()).serial_number(2)
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
            critical=False)
        .sign(ca_key, hashes.SHA256()))
    where.mkdir(parents=True, exist_ok=True)
    cert_file, key_file = where / "apiserver.crt", where / "apiserver.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file, ca.public_bytes(serialization.Encoding.PEM)
