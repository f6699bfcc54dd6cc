"""`hardware_announcer`: announce a robot, camera or accelerator (or this host's GPUs) to the registry.

Robot and camera nodes announce themselves with the same `Announcer`; this node is for resources
without a node of their own (a GPU box, a camera read elsewhere) and for tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from user.bus.base import Bus
from user.config.strict import ConfigError, setting
from user.hardware.accelerators import NVIDIA_SMI_TIMEOUT_S, detect_accelerators
from user.hardware.announce import Announcer
from user.hardware.descriptor import ResourceDescriptor
from user.hardware.errors import InvalidDescriptorError
from user.runtime.node import Node


@dataclass
class HardwareAnnouncerParams:
    resource_id: str = setting("", "unique resource id (letters, digits, '_'); with detect: the id prefix")
    kind: Literal["robot", "camera", "accelerator"] = setting("robot", "resource kind: robot, camera or accelerator")
    model: str = setting("", "model, e.g. franka_panda_sim, realsense_d435, NVIDIA H200")
    site: str = setting("local", "where the resource is, e.g. lab_a, cloud")
    dof: int = setting(0, "robots: degrees of freedom", min=0, max=2**16 - 1)
    control_rate_hz: float = setting(0.0, "robots: control rate; cameras: frame rate", min=0.0)
    cameras: list[str] = setting([], "robots: ids of the attached cameras")
    memory_bytes: int = setting(0, "accelerators: device memory in bytes", min=0)
    compute_units: int = setting(0, "accelerators: SM / compute unit count", min=0)
    properties: dict[str, str] = setting({}, "anything else, free form (string values)")
    detect: bool = setting(False, "accelerators only: announce the GPUs nvidia-smi finds, ids <resource_id>_<n>")
    detect_timeout_s: float = setting(NVIDIA_SMI_TIMEOUT_S, "deadline for nvidia-smi", min=0.1)

    def __post_init__(self) -> None:
        if self.detect and self.kind != "accelerator":
            raise ConfigError(f"detect: true needs kind: accelerator (kind is {self.kind!r})")
        if not self.resource_id:
            raise ConfigError("resource_id is required (with detect: true it is the prefix of the GPU ids)")


class HardwareAnnouncer(Node):
    """Announces the resource(s) described by its parameters until it stops."""

    Params = HardwareAnnouncerParams

    def __init__(self, bus: Bus) -> None:
        super().__init__(bus)
        self.params = self.declare_parameters(HardwareAnnouncerParams)
        self.announcers = [Announcer(self, d) for d in self._descriptors()]

    def _descriptors(self) -> list[ResourceDescriptor]:
        p = self.params
        if p.detect:
            found = detect_accelerators(site=p.site, id_prefix=p.resource_id, timeout_s=p.detect_timeout_s)
            if not found:
                self.log.warning("detect: true, but this host has no NVIDIA GPU (nvidia-smi): announcing nothing")
            return found
        try:
            return [
                ResourceDescriptor(
                    resource_id=p.resource_id,
                    kind=p.kind,
                    model=p.model,
                    site=p.site,
                    dof=p.dof,
                    control_rate_hz=p.control_rate_hz,
                    cameras=tuple(p.cameras),
                    memory_bytes=p.memory_bytes,
                    compute_units=p.compute_units,
                    properties=dict(p.properties),
                )
            ]
        except InvalidDescriptorError as exc:
            raise ConfigError(str(exc)) from exc

    def destroy(self) -> None:
        for announcer in self.announcers:
            announcer.close()
