"""`user certs`: a certificate authority and one certificate per identity (a site's router, a node), for Zenoh's
TLS with mutual authentication. The common name of each certificate is the identity the routers' access
control matches (`cert_common_names`).

Files in the output directory: `ca.pem` (the CA's certificate, every party's root of trust), `ca.key` (the CA's
key: keep it off the robots), and `<name>.pem` / `<name>.key` per identity. Keys are EC P-256, written 0600.
An existing CA in the directory is reused, so identities can be added later without re-issuing the others.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from user.bus.names import is_token

CA_CERT = "ca.pem"
CA_KEY = "ca.key"
DEFAULT_HOSTS = ("localhost", "127.0.0.1")  # names every certificate is valid for, besides `--host`s


class CertError(ValueError):
    """A certificate could not be made or read."""


@dataclass(frozen=True)
class Identity:
    """The files of one identity."""

    name: str  # the certificate's common name
    cert: Path  # PEM certificate signed by the CA
    key: Path  # PEM private key (PKCS#8, unencrypted, mode 0600)


def identity(certs_dir: Path, name: str) -> Identity:
    """Where `name`'s certificate and key are (or will be) in `certs_dir`."""
    return Identity(name, certs_dir / f"{name}.pem", certs_dir / f"{name}.key")


def check_name(name: str) -> None:
    for part in name.split("."):
        if not is_token(part):
            raise CertError(f"invalid identity {name!r}: dot-separated names of letters, digits and '_' only")


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    data = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _validity(builder: x509.CertificateBuilder, days: int) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.timezone.utc)
    return builder.not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(
        now + datetime.timedelta(days=days)
    )


def _load_ca(certs_dir: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None:
    cert_path, key_path = certs_dir / CA_CERT, certs_dir / CA_KEY
    if not cert_path.exists() and not key_path.exists():
        return None
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except (OSError, ValueError) as exc:
        raise CertError(
            f"{certs_dir}: its CA cannot be read ({exc}); remove {CA_CERT} and {CA_KEY} or fix them"
        ) from exc
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise CertError(f"{key_path}: not an EC key")
    return cert, key


def make_ca(certs_dir: Path, common_name: str, days: int) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """The CA of `certs_dir`: the existing one, else a new self-signed one."""
    found = _load_ca(certs_dir)
    if found is not None:
        return found
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        _validity(x509.CertificateBuilder(), days).subject_name(_name(common_name)).issuer_name(_name(common_name))
    )
    builder = builder.public_key(key.public_key()).serial_number(x509.random_serial_number())
    builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
    usage = x509.KeyUsage(False, False, False, False, False, True, True, False, False)  # cert and CRL signing
    cert = builder.add_extension(usage, critical=True).sign(key, hashes.SHA256())
    certs_dir.mkdir(parents=True, exist_ok=True)
    _write_key(certs_dir / CA_KEY, key)
    (certs_dir / CA_CERT).write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert, key


def _alt_names(hosts: Sequence[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def issue(certs_dir: Path, names: Sequence[str], hosts: Sequence[str] = (), days: int = 365) -> list[Identity]:
    """A certificate and key for each of `names` (server and client use), signed by the directory's CA."""
    for name in names:
        check_name(name)
    ca_cert, ca_key = make_ca(certs_dir, "user test CA", days)
    made: list[Identity] = []
    for name in names:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = _validity(x509.CertificateBuilder(), days).subject_name(_name(name)).issuer_name(ca_cert.subject)
        builder = builder.public_key(key.public_key()).serial_number(x509.random_serial_number())
        builder = builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        builder = builder.add_extension(_alt_names([*DEFAULT_HOSTS, *hosts]), critical=False)
        usages = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
        cert = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False).sign(ca_key, hashes.SHA256())
        found = identity(certs_dir, name)
        _write_key(found.key, key)
        found.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        made.append(found)
    return made
