"""ROS topic names and their Zenoh keys (the zenoh-bridge-ros2dds convention: drop the leading '/')."""

from __future__ import annotations

import re

_TOKEN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
TOKEN_RULE = "must start with a letter or '_' and contain only letters, digits and '_'"  # what `is_token` checks


class InvalidNameError(ValueError):
    """A topic or service name does not follow ROS 2 naming rules."""


def is_token(text: str) -> bool:
    """Whether `text` can be one token of a ROS name (the part between two '/'): see `TOKEN_RULE`."""
    return _TOKEN.match(text) is not None


def resolve(name: str, namespace: str = "/") -> str:
    """Fully qualified ROS name: relative names are placed under `namespace`."""
    if not name:
        raise InvalidNameError("empty topic name")
    full = name if name.startswith("/") else f"{namespace.rstrip('/')}/{name}"
    for token in full.strip("/").split("/"):
        if not is_token(token):
            raise InvalidNameError(f"invalid topic name {name!r}: {token!r} {TOKEN_RULE}")
    return full


def topic_to_key(topic: str) -> str:
    """Zenoh key expression of a topic: '/robot/obs' -> 'robot/obs'."""
    return resolve(topic).lstrip("/")


def mangle(text: str) -> str:
    """Make a name a single key chunk ('/' -> '%'), as rmw_zenoh does in liveliness keys."""
    return text.replace("/", "%")


def unmangle(chunk: str) -> str:
    return chunk.replace("%", "/")


def in_domain(domain: str, key: str) -> str:
    """The key of `key` inside `domain` (unchanged when there is no domain)."""
    return f"{domain}/{key}" if domain else key


def out_of_domain(domain: str, key: str) -> str:
    """The inverse of `in_domain` for a key received from the network."""
    prefix = f"{domain}/"
    return key[len(prefix) :] if domain and key.startswith(prefix) else key
