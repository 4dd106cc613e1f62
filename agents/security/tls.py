"""TLS on the Kafka listener, and the principal a client certificate stands for.

`--tls-cert`/`--tls-key` turn the listener into SSL (or SASL_SSL with `--require-sasl`);
`--tls-client-ca` adds mutual TLS: clients must present a certificate signed by that CA,
and its subject becomes their principal, as Kafka's default SSL principal builder does
(`User:CN=alice,OU=…` — the distinguished name in RFC 2253 order). A SASL login on the
same connection replaces that principal, as in Kafka.
"""

from __future__ import annotations

import ssl
from typing import Any

# RFC 2253 / X500Principal.getName() attribute keywords.
_KEYWORDS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


class TlsConfigError(Exception):
    """A certificate, key or CA file cannot be used; the message is one line."""


def server_context(cert: str, key: str, client_ca: str | None = None) -> ssl.SSLContext:
    """The listener's SSL context (TLS 1.2+; client certificates required with a CA)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"cannot load --tls-cert {cert} / --tls-key {key}: {exc}") from None
    if client_ca:
        try:
            context.load_verify_locations(cafile=client_ca)
        except (OSError, ssl.SSLError) as exc:
            raise TlsConfigError(f"cannot load --tls-client-ca {client_ca}: {exc}") from None
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def _escape(value: str) -> str:
    """RFC 2253 section 2.4 escaping of an attribute value."""
    out = []
    for index, char in enumerate(value):
        if char in ',+"\\<>;' or (char == "#" and index == 0):
            out.append("\\" + char)
        elif char == " " and index in (0, len(value) - 1):
            out.append("\\ ")
        else:
            out.append(char)
    return "".join(out)


def principal_from_certificate(peercert: dict[str, Any] | None) -> str | None:
    """`User:<subject DN>` of a verified client certificate (`getpeercert()`), or None."""
    if not peercert or not peercert.get("subject"):
        return None
    rdns = []
    for rdn in peercert["subject"]:
        rdns.append("+".join(f"{_KEYWORDS.get(k, k)}={_escape(v)}" for k, v in rdn))
    # Certificates list the most general RDN first; RFC 2253 strings start with the most
    # specific (CN).
    return "User:" + ",".join(reversed(rdns))
