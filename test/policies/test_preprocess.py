"""Preprocessing onto the policy's device: uint8 pixels travel, the float work happens where the network is."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from user.policies.preprocess import ObservationConfig, preprocess, preprocess_images, to_device


def test_to_device_keeps_a_tensor_already_there() -> None:
    x = torch.zeros(3)
    assert to_device(x, None) is x
    assert to_device(x, torch.device("cpu")) is x


def test_to_device_moves_to_another_device(monkeypatch: pytest.MonkeyPatch) -> None:
    moved: list[tuple[str, bool]] = []

    class Probe(torch.Tensor):
        def pin_memory(self, *args: object, **kwargs: object) -> torch.Tensor:
            moved.append(("pinned", False))
            return self

        def to(self, *args: object, **kwargs: object) -> torch.Tensor:
            moved.append((str(args[0]), bool(kwargs.get("non_blocking", False))))
            return torch.Tensor.as_subclass(torch.zeros(1), torch.Tensor)

    x = torch.zeros(2).as_subclass(Probe)
    to_device(x, torch.device("cuda"))
    assert moved == [("pinned", False), ("cuda", True)]  # from pinned memory, without blocking the host
    moved.clear()
    to_device(x, torch.device("meta"))
    assert moved == [("meta", False)]


def test_preprocess_on_the_cpu_device_equals_the_host_result() -> None:
    cfg = ObservationConfig(cameras=("wrist",), image_size=8, state_mean=(1.0, 2.0), state_std=(2.0, 4.0))
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (3, 16, 16, 3), dtype=np.uint8)
    state = rng.normal(size=(3, 2)).astype(np.float32)
    host = preprocess(state, {"wrist": images}, cfg)
    there = preprocess(state, {"wrist": images}, cfg, torch.device("cpu"))
    torch.testing.assert_close(there.state, host.state, rtol=0, atol=0)
    torch.testing.assert_close(there.images["wrist"], host.images["wrist"], rtol=0, atol=0)
    expected_state = (torch.from_numpy(state) - torch.tensor([1.0, 2.0])) / torch.tensor([2.0, 4.0])
    torch.testing.assert_close(there.state, expected_state)
    assert preprocess_images(images, cfg, torch.device("cpu")).shape == (3, 3, 8, 8)
