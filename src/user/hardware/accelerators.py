"""Find the accelerators of this host: NVIDIA GPUs as `nvidia-smi` reports them, nothing else.

A host without `nvidia-smi` (or where it fails) has no accelerators: nothing is ever made up.
"""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
from collections.abc import Callable

from user.hardware.descriptor import ResourceDescriptor

NVIDIA_SMI_QUERY = ("--query-gpu=name,memory.total", "--format=csv,noheader")
NVIDIA_SMI_TIMEOUT_S = 10.0
_UNITS = {"b": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}

_log = logging.getLogger(__name__)


def parse_memory(text: str) -> int:
    """Bytes of an nvidia-smi memory field such as "143771 MiB"; 0 when it says "[N/A]" or is unreadable."""
    parts = text.strip().split()
    if len(parts) == 2 and parts[1].lower() in _UNITS:
        try:
            return int(float(parts[0]) * _UNITS[parts[1].lower()])
        except ValueError:
            pass
    return 0


def parse_nvidia_smi(output: str) -> list[tuple[str, int]]:
    """(name, memory bytes) per GPU line of `nvidia-smi --query-gpu=name,memory.total --format=csv,noheader`."""
    gpus = []
    for line in output.splitlines():
        if not line.strip():
            continue
        name, _, memory = line.rpartition(",")  # a GPU name may itself contain commas; memory never does
        gpus.append((name.strip() or memory.strip(), parse_memory(memory)))
    return gpus


def query_nvidia_smi(timeout_s: float = NVIDIA_SMI_TIMEOUT_S) -> list[tuple[str, int]]:
    """GPUs listed by nvidia-smi; [] when it is absent, fails, or does not answer within `timeout_s`."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        _log.debug("nvidia-smi is not on PATH: no NVIDIA GPUs")
        return []
    try:
        done = subprocess.run([exe, *NVIDIA_SMI_QUERY], check=False, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _log.warning("nvidia-smi did not answer within %.1f s: reporting no GPUs", timeout_s)
        return []
    except OSError as exc:
        _log.warning("cannot run nvidia-smi (%s): reporting no GPUs", exc)
        return []
    if done.returncode != 0:
        _log.warning("nvidia-smi failed (exit %d: %s): reporting no GPUs", done.returncode, done.stderr.strip())
        return []
    return parse_nvidia_smi(done.stdout)


def torch_sm_counts() -> list[int]:
    """Streaming-multiprocessor count per CUDA device as torch sees it; [] without torch or CUDA."""
    try:
        import torch
    except ImportError:
        return []
    try:
        if not torch.cuda.is_available():
            return []
        return [
            int(torch.cuda.get_device_properties(i).multi_processor_count) for i in range(torch.cuda.device_count())
        ]
    except Exception as exc:  # a broken driver raises many kinds of errors; SM counts are optional
        _log.warning("torch could not read CUDA device properties (%s): SM counts unknown", exc)
        return []


def detect_accelerators(
    site: str = "local",
    id_prefix: str = "gpu",
    timeout_s: float = NVIDIA_SMI_TIMEOUT_S,
    sm_counts: Callable[[], list[int]] = torch_sm_counts,
) -> list[ResourceDescriptor]:
    """One accelerator descriptor per GPU of this host, ids `<id_prefix>_<index>`; [] when there is none.

    SM counts come from torch when it is importable and sees the same number of devices (else 0: unknown).
    """
    gpus = query_nvidia_smi(timeout_s)
    if not gpus:
        return []
    sms = sm_counts()
    if len(sms) != len(gpus):
        sms = [0] * len(gpus)  # CUDA_VISIBLE_DEVICES or a missing torch: cannot match devices reliably
    host = socket.gethostname()
    return [
        ResourceDescriptor(
            resource_id=f"{id_prefix}_{index}",
            kind="accelerator",
            model=name,
            site=site,
            memory_bytes=memory,
            compute_units=sm,
            properties={"index": str(index), "host": host, "vendor": "nvidia"},
        )
        for index, ((name, memory), sm) in enumerate(zip(gpus, sms, strict=True))
    ]
