"""detect_accelerators: what nvidia-smi reports, and nothing at all where it is absent or fails."""

from __future__ import annotations

import os
import shutil
import stat
import time
from pathlib import Path

import pytest

from user.hardware.accelerators import detect_accelerators, parse_memory, parse_nvidia_smi


def test_parse_nvidia_smi_lines() -> None:
    out = "NVIDIA H200, 143771 MiB\nNVIDIA GeForce RTX 4090, 24564 MiB\n\nTesla, Rev B, [N/A]\n"
    assert parse_nvidia_smi(out) == [
        ("NVIDIA H200", 143_771 * 2**20),
        ("NVIDIA GeForce RTX 4090", 24_564 * 2**20),
        ("Tesla, Rev B", 0),
    ]
    assert parse_memory("80 GiB") == 80 * 2**30
    assert parse_memory("lots") == 0


def _tool(directory: Path, body: str) -> Path:
    """An executable `nvidia-smi` stand-in in `directory` (the command, not a GPU)."""
    path = directory / "nvidia-smi"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def path_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PATH holding only an empty directory (plus /bin for sh and sleep)."""
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}/bin{os.pathsep}/usr/bin")
    return tmp_path


def test_no_nvidia_smi_means_no_accelerators(path_dir: Path) -> None:
    assert shutil.which("nvidia-smi") is None
    assert detect_accelerators() == []


def test_a_failing_nvidia_smi_means_no_accelerators(path_dir: Path) -> None:
    _tool(path_dir, "echo 'NVIDIA-SMI has failed because it could not communicate with the driver' >&2; exit 9")
    assert detect_accelerators() == []


def test_a_hanging_nvidia_smi_is_given_up_at_the_deadline(path_dir: Path) -> None:
    _tool(path_dir, "exec sleep 30")
    start = time.monotonic()
    assert detect_accelerators(timeout_s=0.5) == []
    assert time.monotonic() - start < 10.0


def test_reported_gpus_become_accelerator_descriptors(path_dir: Path) -> None:
    _tool(path_dir, "echo 'NVIDIA H200, 143771 MiB'; echo 'NVIDIA H200, 143771 MiB'")
    found = detect_accelerators(site="cloud", id_prefix="cloud_gpu", sm_counts=lambda: [132, 132])
    assert [d.resource_id for d in found] == ["cloud_gpu_0", "cloud_gpu_1"]
    assert all(d.kind == "accelerator" and d.site == "cloud" and d.model == "NVIDIA H200" for d in found)
    assert all(d.memory_bytes == 143_771 * 2**20 and d.compute_units == 132 for d in found)
    assert [d.properties["index"] for d in found] == ["0", "1"]
    # torch seeing a different device set (CUDA_VISIBLE_DEVICES) leaves SM counts unknown rather than wrong
    assert [d.compute_units for d in detect_accelerators(sm_counts=lambda: [132])] == [0, 0]


def test_this_host_reports_only_real_gpus() -> None:
    found = detect_accelerators()
    if shutil.which("nvidia-smi") is None:
        assert found == []
    for d in found:
        assert d.kind == "accelerator" and d.model and d.memory_bytes > 0
