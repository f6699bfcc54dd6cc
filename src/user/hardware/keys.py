"""Where resources are announced: the descriptor topic and the liveliness token key of each."""

from __future__ import annotations

from dataclasses import dataclass

from user.bus.names import mangle, unmangle
from user.hardware.descriptor import RESOURCE_KINDS, check_resource_id

TOKEN_PREFIX = "@user/hw"  # liveliness tokens: @user/hw/<kind>/<resource id>


def descriptor_topic(resource_id: str) -> str:
    """The latched topic carrying a resource's descriptor: /hardware/<id>/descriptor."""
    return f"/hardware/{check_resource_id(resource_id)}/descriptor"


def token_key(kind: str, resource_id: str) -> str:
    """The liveliness token that is alive exactly while the resource is."""
    return f"{TOKEN_PREFIX}/{mangle(kind)}/{mangle(resource_id)}"


@dataclass(frozen=True)
class TokenName:
    """What a token key under TOKEN_PREFIX names."""

    kind: str
    resource_id: str


def parse_token_key(key: str) -> TokenName | None:
    """The (kind, id) named by a token key; None for keys that are not resource tokens."""
    prefix = TOKEN_PREFIX + "/"
    if not key.startswith(prefix):
        return None
    parts = key[len(prefix) :].split("/")
    if len(parts) != 2 or unmangle(parts[0]) not in RESOURCE_KINDS or not parts[1]:
        return None
    return TokenName(kind=unmangle(parts[0]), resource_id=unmangle(parts[1]))
