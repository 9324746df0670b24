"""The dev cluster's PKI, made with the ``openssl`` command: a CA, certificates and SA keys.

Called by ``cluster.up`` once per fresh cluster folder. Produces, in ``<cluster>/pki``:
``ca.crt``/``ca.key`` (the cluster CA; also signs CSRs through kube-controller-manager),
``apiserver.crt``/``.key`` (serving certificate for 127.0.0.1, localhost and the in-cluster
names), ``admin.crt``/``.key`` (client certificate ``CN=admin, O=system:masters``) and
``sa.key``/``sa.pub`` (ServiceAccount token signing). ECDSA P-256 keeps generation fast.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

_DAYS = "3650"
_EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


class CertError(RuntimeError):
    """openssl is missing or refused to make a key or certificate."""


@dataclass(frozen=True)
class Pki:
    """Paths of the files written by :func:`make_pki`."""

    directory: Path

    @property
    def ca_crt(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.directory / "ca.key"

    @property
    def serving_crt(self) -> Path:
        return self.directory / "apiserver.crt"

    @property
    def serving_key(self) -> Path:
        return self.directory / "apiserver.key"

    @property
    def admin_crt(self) -> Path:
        return self.directory / "admin.crt"

    @property
    def admin_key(self) -> Path:
        return self.directory / "admin.key"

    @property
    def sa_key(self) -> Path:
        return self.directory / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.directory / "sa.pub"


SERVING_SANS = (
    "IP:127.0.0.1",
    "IP:10.0.0.1",
    "DNS:localhost",
    "DNS:kubernetes",
    "DNS:kubernetes.default",
    "DNS:kubernetes.default.svc",
    "DNS:kubernetes.default.svc.cluster.local",
)


def _openssl(args: Sequence[str], cwd: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise CertError("the `openssl` command is needed to make the dev cluster's certificates")
    proc = subprocess.run([openssl, *args], cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise CertError(f"openssl {args[0]} failed: {proc.stderr.strip()}")


def _signed(pki: Pki, name: str, subject: str, extensions: str) -> None:
    """Make ``<name>.key`` and ``<name>.crt`` signed by the CA with the given v3 extensions."""
    directory = pki.directory
    ext_file = directory / f"{name}.ext"
    ext_file.write_text(extensions + "\n")
    _openssl(
        ["req", "-new", *_EC, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject],
        directory,
    )
    _openssl(
        [
            "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-set_serial", f"0x{secrets.token_hex(8)}", "-days", _DAYS, "-sha256",
            "-extfile", ext_file.name, "-out", f"{name}.crt",
        ],
        directory,
    )  # fmt: skip
    (directory / f"{name}.csr").unlink()
    ext_file.unlink()


def make_pki(directory: Path) -> Pki:
    """Write a fresh CA, serving and admin certificates and the SA key pair into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    pki = Pki(directory)
    _openssl(
        [
            "req", "-x509", *_EC, "-keyout", "ca.key", "-out", "ca.crt", "-days", _DAYS,
            "-subj", "/CN=modelserving-devcluster-ca", "-sha256",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
        ],
        directory,
    )  # fmt: skip
    _signed(
        pki,
        "apiserver",
        "/CN=kube-apiserver",
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\nsubjectAltName=" + ",".join(SERVING_SANS),
    )
    _signed(
        pki,
        "admin",
        "/O=system:masters/CN=admin",
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=clientAuth",
    )
    _openssl(
        ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "sa.key"],
        directory,
    )
    _openssl(["pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub"], directory)
    for key in directory.glob("*.key"):
        key.chmod(0o600)
    return pki
