"""Deterministic observations with two 128x128 JPEG images, and a publisher process that sends them.

Run as `python -m test.helpers.observations TOPIC COUNT` (from the repository root): waits for a
subscriber, publishes COUNT observations reliably over ZenohBus, then exits 0.
"""

from __future__ import annotations

import sys

import numpy as np

from user.bus.zenoh_bus import ZenohBus
from user.interfaces.domain import EncodedImage, Observation
from user.interfaces.images import encode_jpeg
from user.runtime.node import Node


def make_image(seed: int) -> np.ndarray:
    """A smooth gradient plus noise: compresses like a camera frame, differs per seed."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:128, 0:128]
    base = np.stack([(x + seed) % 256, (y * 2) % 256, ((x + y) // 2 + seed * 7) % 256], axis=-1)
    return np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)


def make_observation(i: int) -> Observation:
    images = tuple(
        EncodedImage(camera=cam, format="jpeg", data=encode_jpeg(make_image(2 * i + k)), stamp_ns=10**18 + i)
        for k, cam in enumerate(("wrist", "front"))
    )
    return Observation(
        robot_id="franka_1",
        task="peg_insertion",
        episode_id=i // 100,
        step=i % 100,
        state=np.linspace(-1.0, 1.0, 19, dtype=np.float32) * (i + 1),
        stamp_ns=10**18 + i * 100_000_000,
        images=images,
        state_names=("x", "y"),
        embodiment_id=1,
        policy_version=i // 50,
    )


def main(topic: str, count: int) -> int:
    from user.interfaces.domain import observation_to_msg

    bus = ZenohBus("obs_publisher")
    try:
        node = Node(bus)
        pub = node.create_publisher(topic, "user/msg/Observation")
        if not pub.raw.wait_for_subscribers(20.0):  # type: ignore[attr-defined]
            print("no subscriber", file=sys.stderr)
            return 1
        for i in range(count):
            pub.publish(observation_to_msg(make_observation(i), node.codec))
    finally:
        bus.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2])))
