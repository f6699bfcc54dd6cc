"""Simulated cameras: latest-frame, time-stamped, never blocking the control loop.

The control loop `submit`s a snapshot of the simulation state (joint positions and fixture poses,
copied: a few hundred bytes) after each period. In "thread" mode a background thread renders the newest
snapshot into its own `MjData` copy and keeps the latest frame per camera; snapshots that arrive while
it is busy replace each other (counted as dropped), so rendering speed never slows the loop. In "inline"
mode `submit` renders at once, in the caller's thread: every period gets its frames, deterministically.

A frame's `stamp_ns` is the simulation time of the state it shows, on the same clock as `ArmState`.
Rendering uses MuJoCo's OpenGL renderer (MUJOCO_GL=egl headless; set before mujoco is imported),
shadows and reflections off.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

import mujoco
import numpy as np
import numpy.typing as npt

from user.config import setting
from user.sim.errors import RenderError

_log = logging.getLogger(__name__)
_IDLE_WAIT_S = 0.1  # the render thread re-checks for shutdown this often when idle
_JOIN_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class SimCameraConfig:
    """Which simulated cameras render, how big, and how."""

    names: tuple[str, ...] = setting(("wrist", "front"), "scene cameras to render (empty: no cameras)")
    width: int = setting(128, "image width, pixels", min=8, max=4096)
    height: int = setting(128, "image height, pixels", min=8, max=4096)
    mode: str = setting(
        "thread",
        "thread: a background thread renders the newest state (never blocks control); inline: render every "
        "period in the control loop (deterministic, slower)",
        choices=("thread", "inline"),
    )
    start_timeout_s: float = setting(20.0, "longest wait for the renderer to come up, s", min=0.1)


@dataclass(frozen=True)
class Frame:
    """One rendered image."""

    camera: str  # scene camera name
    image: npt.NDArray[np.uint8]  # (height, width, 3) RGB, read-only (shared): copy before changing it
    stamp_ns: int  # simulation time of the state shown (same clock as ArmState.stamp_ns)
    seq: int  # index of the snapshot it shows (increases with every submit)
    rendered_ns: int  # time.monotonic_ns() when rendering finished


@dataclass(frozen=True)
class _Snapshot:
    qpos: npt.NDArray[np.float64]
    mocap_pos: npt.NDArray[np.float64]
    mocap_quat: npt.NDArray[np.float64]
    stamp_ns: int
    seq: int


class SimCameras:
    """Renders the configured cameras of one model from submitted state snapshots."""

    def __init__(self, model: mujoco.MjModel, config: SimCameraConfig) -> None:
        missing = [n for n in config.names if mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, n) < 0]
        if missing:
            known = [model.camera(i).name for i in range(model.ncam)]
            raise RenderError(f"the scene has no camera {missing[0]!r} (cameras: {', '.join(known)})")
        self._model = model
        self.config = config
        self._data = mujoco.MjData(model)
        self._cond = threading.Condition()
        self._pending: _Snapshot | None = None
        self._frames: dict[str, Frame] = {}
        self._seq = 0
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._renderer: mujoco.Renderer | None = None
        self.rendered = 0  # snapshots rendered
        self.dropped = 0  # snapshots replaced before they were rendered

    @property
    def names(self) -> tuple[str, ...]:
        return self.config.names

    def start(self) -> None:
        """Bring the renderer up (in the render thread for "thread" mode); raises `RenderError` on failure."""
        if not self.config.names or self._renderer is not None or self._thread is not None:
            return
        if self.config.mode == "inline":
            self._renderer = self._make_renderer()
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="sim-cameras", daemon=True)
        self._thread.start()
        if not self._ready.wait(self.config.start_timeout_s):
            self.close()
            raise RenderError(f"the camera renderer did not start within {self.config.start_timeout_s} s")
        if self._error is not None:
            error, self._error = self._error, None
            self.close()
            raise RenderError(f"cannot render cameras: {error}") from error

    def submit(self, data: mujoco.MjData, stamp_ns: int) -> None:
        """Hand over the current state for rendering; returns at once in "thread" mode."""
        if not self.config.names:
            return
        self._seq += 1
        snap = _Snapshot(data.qpos.copy(), data.mocap_pos.copy(), data.mocap_quat.copy(), stamp_ns, self._seq)
        if self.config.mode == "inline":
            if self._renderer is None:
                raise RenderError("cameras are not started; call start() first")
            self._render(self._renderer, snap)
            return
        with self._cond:
            if self._pending is not None:
                self.dropped += 1
            self._pending = snap
            self._cond.notify()

    def latest(self, camera: str) -> Frame | None:
        """The newest frame of `camera`, or None before the first one."""
        with self._cond:
            return self._frames.get(camera)

    def frames(self) -> dict[str, Frame]:
        """The newest frame of every camera that has one."""
        with self._cond:
            return dict(self._frames)

    def wait_for(self, seq: int, timeout_s: float) -> bool:
        """Block until every camera shows snapshot `seq` or later, at most `timeout_s`; True when they do."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not self._frames_at(seq):
                left = deadline - time.monotonic()
                if left <= 0.0:
                    return False
                self._cond.wait(left)
            return True

    def wait_newer(self, camera: str, after_seq: int, timeout_s: float) -> Frame | None:
        """The newest frame of `camera` once its `seq` exceeds `after_seq`, waiting at most `timeout_s`; else None."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                frame = self._frames.get(camera)
                if frame is not None and frame.seq > after_seq:
                    return frame
                left = deadline - time.monotonic()
                if left <= 0.0:
                    return None
                self._cond.wait(left)

    def source(self, camera: str) -> SimFrameSource:
        """`camera` as a frame source for the camera layer (`user.cameras.frame.FrameSource`)."""
        if camera not in self.config.names:
            raise RenderError(f"camera {camera!r} is not rendered (rendered: {', '.join(self.config.names)})")
        return SimFrameSource(self, camera)

    @property
    def last_seq(self) -> int:
        """Sequence number of the last submitted snapshot."""
        return self._seq

    def close(self) -> None:
        """Stop the render thread (bounded wait) and free the renderer."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(_JOIN_TIMEOUT_S)
            if self._thread.is_alive():
                _log.warning("camera render thread did not stop within %.1f s", _JOIN_TIMEOUT_S)
            self._thread = None
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
        self._ready.clear()

    def _frames_at(self, seq: int) -> bool:
        return all(n in self._frames and self._frames[n].seq >= seq for n in self.config.names)

    def _make_renderer(self) -> mujoco.Renderer:
        try:
            renderer = mujoco.Renderer(self._model, self.config.height, self.config.width)
        except Exception as exc:  # no GL backend, offscreen buffer too small, ...
            raise RenderError(
                f"cannot create the MuJoCo renderer ({exc}); headless machines need MUJOCO_GL=egl (or osmesa) "
                "set before mujoco is imported"
            ) from exc
        renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = False
        renderer.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = False
        return renderer

    def _loop(self) -> None:
        try:
            renderer = self._make_renderer()
        except RenderError as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            while not self._stop.is_set():
                with self._cond:
                    if self._pending is None:
                        self._cond.wait(_IDLE_WAIT_S)
                        continue
                    snap, self._pending = self._pending, None
                self._render(renderer, snap)
        except Exception:
            _log.exception("camera render thread failed; no new frames will come")
        finally:
            renderer.close()

    def _render(self, renderer: mujoco.Renderer, snap: _Snapshot) -> None:
        m, d = self._model, self._data
        d.qpos[:] = snap.qpos
        d.mocap_pos[:] = snap.mocap_pos
        d.mocap_quat[:] = snap.mocap_quat
        mujoco.mj_kinematics(m, d)
        mujoco.mj_camlight(m, d)
        frames = {}
        for name in self.config.names:
            renderer.update_scene(d, camera=name)
            image = renderer.render()  # a new array per call
            image.flags.writeable = False  # shared with every reader
            frames[name] = Frame(name, image, snap.stamp_ns, snap.seq, time.monotonic_ns())
        with self._cond:
            self._frames.update(frames)
            self.rendered += 1
            self._cond.notify_all()


class SimFrameSource:
    """One simulated camera shaped as a `user.cameras.frame.FrameSource`: `grab` hands out each new frame once.

    The stamp is the simulation time of the state shown, the same clock as the robot's `ArmState`.
    """

    def __init__(self, cameras: SimCameras, camera: str) -> None:
        self._cameras = cameras
        self.camera = camera
        self._last_seq = 0

    def grab(self, timeout_s: float) -> tuple[npt.NDArray[np.uint8], int | None] | None:
        """The next frame newer than the last one grabbed (waiting at most `timeout_s`), or None."""
        frame = self._cameras.wait_newer(self.camera, self._last_seq, timeout_s)
        if frame is None:
            return None
        self._last_seq = frame.seq
        return frame.image, frame.stamp_ns
