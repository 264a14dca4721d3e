"""Constants and helpers the Kubernetes tests share (imported by conftest and the tests)."""

from __future__ import annotations

import base64
import shutil
from pathlib import Path

import yaml

STEPS, EVERY = 30, 5
TRAIN = f"python train_mlp.py --ckpt-dir $RGT_CKPT_DIR --out out --steps {STEPS} " \
        f"--save-every {EVERY} --sleep 0.05"
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
    (server cert file, server key file, CA PEM); beside them the CA (ca.crt) and a client
    certificate for user "bob" (bob.crt, bob.key) that the fake API accepts."""
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
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = (x509.CertificateBuilder().subject_name(name("bob")).issuer_name(ca.subject)
              .public_key(client_key.public_key()).serial_number(3)
              .not_valid_before(now - datetime.timedelta(hours=1))
              .not_valid_after(now + datetime.timedelta(days=1))
              .sign(ca_key, hashes.SHA256()))
    (where / "bob.crt").write_bytes(client.public_bytes(serialization.Encoding.PEM))
    (where / "bob.key").write_bytes(client_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption()))
    (where / "ca.crt").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_file, key_file = where / "apiserver.crt", where / "apiserver.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file, ca.public_bytes(serialization.Encoding.PEM)


def up(tmp_path: Path, image: str = IMAGE, **options) -> None:
    from rgt.lifecycle import boxes
    from rgt.spec import Resources
    from rgt.store import Store

    boxes.up(Store(), "k8s", "kubernetes", None, rate=None, data_dir=None, durable_dir=None,
             resources=Resources(image=image, disk="1G"),
             options={"mount_path": str(tmp_path / "mnt" / "checkpoints"), **options})


def job_spec(tmp_path: Path, extra: str = "") -> Path:
    work = tmp_path / "job"
    work.mkdir(exist_ok=True)
    import rgt.examples.train_mlp as train_mlp

    shutil.copy(train_mlp.__file__, work / "train_mlp.py")
    spec = tmp_path / "job.yaml"
    spec.write_text(f"name: mlp\nworkdir: job\nrun: {TRAIN}\noutputs: [out/]\n"
                    "checkpoint_dir: $RGT_CKPT_DIR\n"
                    'resources: {gpu: "A100:1", time: "10m"}\n'
                    'env: {RGT_CKPT_WRITE_S: "1"}\n' + extra)
    return spec


COUNTER = '''"""A training stand-in without torch: counts, one checkpoint per step (rgt.ckpt)."""
import os, sys, time
from rgt.ckpt import Checkpointer, PreemptionFlag, EXIT_PREEMPTED

total, pause = int(sys.argv[1]), float(sys.argv[2])
ckpt = Checkpointer(os.environ["RGT_CKPT_DIR"], keep_last=2)
loaded = ckpt.load_latest()
start = loaded.step + 1 if loaded else 1
print(f"resumed step={loaded.step}" if loaded else "fresh start", flush=True)
with PreemptionFlag() as preempted:
    for step in range(start, total + 1):
        time.sleep(pause)
        ckpt.save({"step": step}, step)
        print(f"step={step}", flush=True)
        if preempted:
            print(f"preempted step={step}", flush=True)
            sys.exit(EXIT_PREEMPTED)
os.makedirs("out", exist_ok=True)
open("out/count.txt", "w").write(str(total))
print(f"done step={total}", flush=True)
'''


def counter_spec(tmp_path: Path, steps: int = 20, pause: float = 0.1, extra: str = "") -> Path:
    """A job that needs no torch (fast pods): counts, checkpoints every step, resumes."""
    work = tmp_path / "counter"
    work.mkdir(exist_ok=True)
    (work / "count.py").write_text(COUNTER)
    spec = tmp_path / "counter.yaml"
    spec.write_text(f"name: counter\nworkdir: counter\nrun: python count.py {steps} {pause}\n"
                    "outputs: [out/]\ncheckpoint_dir: $RGT_CKPT_DIR\n"
                    'resources: {gpu: "A100:1"}\n' + extra)
    return spec


def up_cli(tmp_path: Path, *flags: str, image: str = IMAGE):
    """`rgt up k8s --profile kubernetes` as a user types it; returns the finished process."""
    from cli import rgt

    return rgt("up", "k8s", "--profile", "kubernetes", "--image", image, "--disk", "1",
               "--mount-path", str(tmp_path / "mnt" / "checkpoints"), *flags)
