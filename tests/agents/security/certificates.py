"""A throwaway certificate authority for TLS tests: the `cryptography` package when it is
installed (it comes with moto), else the `openssl` command line."""

from __future__ import annotations

import datetime
import ipaddress
import shutil
import subprocess
from pathlib import Path

try:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
except ImportError:  # pragma: no cover - exercised only where cryptography is missing
    x509 = None


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attributes = []
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attributes)


def TestCA(folder: Path, name: str = "Floe Test CA"):  # noqa: N802 - reads as a class
    """`TestCA(dir).issue("alice")` → (cert path, key path), signed by a new CA;
    `.cert_path` is the CA certificate."""
    if x509 is not None:
        return CryptographyCA(folder, name)
    if shutil.which("openssl"):
        return OpensslCA(folder, name)
    import pytest

    pytest.skip("neither the cryptography package nor the openssl command is available")


class CryptographyCA:
    __test__ = False  # not a pytest class

    def __init__(self, folder: Path, name: str = "Floe Test CA") -> None:
        self.folder = folder
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(_name(name))
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self.key, hashes.SHA256())
        )
        self.cert_path = self._write(f"{name.replace(' ', '-').lower()}.pem", self.cert, None)

    def _write(self, filename: str, cert: x509.Certificate, key) -> Path:
        path = self.folder / filename
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        if key is not None:
            key_path = self.folder / filename.replace(".pem", ".key")
            key_path.write_bytes(
                key.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption(),
                )
            )
        return path

    def issue(
        self, common_name: str, *, server: bool = False, organization: str | None = None
    ) -> tuple[str, str]:
        """A leaf certificate: for a server (SAN 127.0.0.1, localhost) or a client."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name, organization))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
        cert = builder.sign(self.key, hashes.SHA256())
        path = self._write(f"{common_name.lower()}.pem", cert, key)
        return str(path), str(path).replace(".pem", ".key")


class OpensslCA:
    """The same CA made with the `openssl` command line."""

    def __init__(self, folder: Path, name: str = "Floe Test CA") -> None:
        self.folder = folder
        stem = name.replace(" ", "-").lower()
        self.key_path = folder / f"{stem}.key"
        self.cert_path = folder / f"{stem}.pem"
        self._run(
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", self.key_path, "-out", self.cert_path, "-days", "1",
            "-subj", f"/CN={name}",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        )  # fmt: skip

    def _run(self, *args) -> None:
        subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True, timeout=30)

    def issue(
        self, common_name: str, *, server: bool = False, organization: str | None = None
    ) -> tuple[str, str]:
        cert = self.folder / f"{common_name.lower()}.pem"
        key = self.folder / f"{common_name.lower()}.key"
        csr = self.folder / f"{common_name.lower()}.csr"
        extensions = self.folder / f"{common_name.lower()}.ext"
        subject = (f"/O={organization}" if organization else "") + f"/CN={common_name}"
        self._run(
            "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", key, "-out", csr, "-subj", subject,
        )  # fmt: skip
        lines = ["basicConstraints=critical,CA:FALSE"]
        if server:
            lines += ["extendedKeyUsage=serverAuth", "subjectAltName=DNS:localhost,IP:127.0.0.1"]
        else:
            lines += ["extendedKeyUsage=clientAuth"]
        extensions.write_text("\n".join(lines) + "\n")
        self._run(
            "x509", "-req", "-in", csr, "-CA", self.cert_path, "-CAkey", self.key_path,
            "-CAcreateserial", "-out", cert, "-days", "1", "-extfile", extensions,
        )  # fmt: skip
        return str(cert), str(key)
