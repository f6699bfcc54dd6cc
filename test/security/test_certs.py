"""`user certs` and `user.security.certs`: a CA that signs one certificate per identity, its common name the
identity the routers' access control matches; keys private to their owner; an existing CA reused."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from test.conftest import user_cmd
from user.security.certs import CertError, issue


def _cn(cert: x509.Certificate) -> str:
    return str(cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value)


def test_certificates_are_signed_by_the_ca_named_and_private(tmp_path: Path) -> None:
    made = issue(tmp_path, ["router.cloud", "learner"], hosts=["10.0.0.5", "lab.example"])
    ca = x509.load_pem_x509_certificate((tmp_path / "ca.pem").read_bytes())
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    for item in made:
        cert = x509.load_pem_x509_certificate(item.cert.read_bytes())
        assert _cn(cert) == item.name and cert.issuer == ca.subject
        public = ca.public_key()
        assert isinstance(public, ec.EllipticCurvePublicKey)
        assert cert.signature_hash_algorithm is not None
        public.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm))
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert "lab.example" in names.get_values_for_type(x509.DNSName)
        assert {str(a) for a in names.get_values_for_type(x509.IPAddress)} == {"127.0.0.1", "10.0.0.5"}
        assert stat.S_IMODE(item.key.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "ca.key").stat().st_mode) == 0o600


def test_an_existing_ca_is_reused(tmp_path: Path) -> None:
    issue(tmp_path, ["a"])
    before = (tmp_path / "ca.pem").read_bytes()
    issue(tmp_path, ["b"])
    assert (tmp_path / "ca.pem").read_bytes() == before
    b = x509.load_pem_x509_certificate((tmp_path / "b.pem").read_bytes())
    assert b.issuer == x509.load_pem_x509_certificate(before).subject


@pytest.mark.parametrize("name", ["", "a/b", "router..x", "x y"])
def test_a_bad_identity_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(CertError, match="invalid identity"):
        issue(tmp_path, [name])


def test_the_command_names_what_is_missing(tmp_path: Path) -> None:
    none = subprocess.run(user_cmd("certs", str(tmp_path)), capture_output=True, text=True, timeout=60)
    assert none.returncode == 2 and "name identities to certify, or give --deployment FILE" in none.stderr
    (tmp_path / "ca.pem").write_text("garbage")
    (tmp_path / "ca.key").write_text("garbage")
    bad = subprocess.run(user_cmd("certs", str(tmp_path), "x"), capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "its CA cannot be read" in bad.stderr
