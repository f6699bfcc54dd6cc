"""SafetyFilter: per-step scaling and clipping, workspace box, orientation limit, gripper range, bad data."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from user.config.strict import ConfigError, from_mapping
from user.robots import rotations as rot
from user.robots.safety import ACTION_NAMES, SafetyConfig, SafetyError, SafetyFilter, check_action, clip_unit

DOWN = rot.from_euler(math.pi, 0.0, 0.0)
START = np.concatenate([[0.5, 0.0, 0.3], DOWN])
STEP_M = 0.02
STEP_RAD = 0.1


def make_filter(**overrides: Any) -> SafetyFilter:
    return SafetyFilter(
        SafetyConfig(max_translation_per_step_m=STEP_M, max_rotation_per_step_rad=STEP_RAD, **overrides)
    )


def action(*values: float) -> np.ndarray:
    a = np.zeros(7, np.float32)
    a[: len(values)] = values
    return a


# ---- config -------------------------------------------------------------------------------------------


def test_config_loads_from_mapping_with_every_field() -> None:
    cfg = from_mapping(
        SafetyConfig,
        {
            "workspace_min": [0.3, -0.2, 0.05],
            "workspace_max": [0.6, 0.2, 0.4],
            "max_translation_per_step_m": 0.01,
            "max_rotation_per_step_rad": 0.05,
            "nominal_orientation": [1.0, 0.0, 0.0, 0.0],
            "max_orientation_deviation_rad": 0.5,
            "gripper_min": 0.1,
            "gripper_max": 0.9,
        },
        where="safety.yaml",
    )
    assert cfg.workspace_max == (0.6, 0.2, 0.4)
    assert cfg.nominal_orientation == (1.0, 0.0, 0.0, 0.0)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"workspace_limits": [0, 0, 0]}, "unknown key 'workspace_limits'"),
        ({"max_translation_per_step_m": 5.0}, "above the maximum"),
        ({"workspace_min": [0.8, 0.0, 0.0]}, "workspace x: workspace_min 0.8 must be below workspace_max"),
        ({"workspace_min": [0.1, 0.0]}, "expected 3 items"),
        ({"nominal_orientation": [1.0, 0.0, 0.0, 0.0]}, "set both or neither"),
        ({"nominal_orientation": [0, 0, 0, 0], "max_orientation_deviation_rad": 0.3}, "no direction"),
        ({"nominal_orientation": [1, 0, 0, 0], "max_orientation_deviation_rad": 4.0}, "outside"),
        ({"gripper_min": 0.8, "gripper_max": 0.2}, "gripper_min 0.8 is above gripper_max 0.2"),
    ],
)
def test_bad_config_is_an_error_naming_the_key(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        from_mapping(SafetyConfig, data, where="safety.yaml")


def test_config_is_validated_when_built_in_code_too() -> None:
    with pytest.raises(ConfigError, match="max_rotation_per_step_rad"):
        SafetyConfig(max_rotation_per_step_rad=float("nan"))


# ---- scaling and per-axis clipping ----------------------------------------------------------------------


def test_zero_action_keeps_the_pose() -> None:
    cmd = make_filter().filter(START, action(), 0.7)
    np.testing.assert_allclose(cmd.target_pose, START)
    assert not cmd.clipped and not cmd.held and cmd.reasons == ()
    assert cmd.gripper == pytest.approx(0.5)  # gripper is absolute: 0 -> half open


def test_deltas_are_scaled_by_the_per_step_limits() -> None:
    cmd = make_filter().filter(START, action(0.5, -0.25, 1.0), 0.0)
    np.testing.assert_allclose(cmd.target_pose[:3], START[:3] + np.array([0.01, -0.005, 0.02]))
    np.testing.assert_allclose(cmd.applied, action(0.5, -0.25, 1.0))
    assert not cmd.clipped


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("value", [3.0, -1e30])
def test_translation_is_clipped_per_axis(axis: int, value: float) -> None:
    a = action()
    a[axis] = value
    cmd = make_filter().filter(START, a, 0.0)
    expected = START[:3].copy()
    expected[axis] += math.copysign(STEP_M, value)
    np.testing.assert_allclose(cmd.target_pose[:3], expected)
    assert cmd.clipped
    assert cmd.applied[axis] == math.copysign(1.0, value)
    assert len(cmd.reasons) == 1 and cmd.reasons[0].startswith(ACTION_NAMES[axis])


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_rotation_is_clipped_per_axis_and_applied_about_base_axes(axis: int) -> None:
    a = action()
    a[3 + axis] = -2.0
    cmd = make_filter().filter(START, a, 0.0)
    delta = np.zeros(3)
    delta[axis] = -STEP_RAD
    np.testing.assert_allclose(cmd.target_pose[3:], rot.apply_rotvec(DOWN, delta), atol=1e-12)
    np.testing.assert_allclose(cmd.target_pose[:3], START[:3])
    assert cmd.clipped and cmd.applied[3 + axis] == -1.0
    assert cmd.reasons[0].startswith(ACTION_NAMES[3 + axis])


def test_the_input_pose_and_action_are_not_modified() -> None:
    pose, a = START.copy(), action(5.0, 0, 0, 1.0)
    make_filter().filter(pose, a, 0.0)
    np.testing.assert_array_equal(pose, START)
    np.testing.assert_array_equal(a, action(5.0, 0, 0, 1.0))


# ---- workspace box --------------------------------------------------------------------------------------


def test_position_is_clipped_into_the_workspace_box() -> None:
    f = make_filter(workspace_min=(0.3, -0.2, 0.1), workspace_max=(0.6, 0.2, 0.4))
    near_edge = START.copy()
    near_edge[:3] = [0.595, 0.0, 0.105]
    cmd = f.filter(near_edge, action(1.0, 0.5, -1.0), 0.0)
    np.testing.assert_allclose(cmd.target_pose[:3], [0.6, 0.01, 0.1])
    assert cmd.clipped
    assert [r.split()[0] for r in cmd.reasons] == ["x", "z"]
    assert "outside the workspace" in cmd.reasons[0]
    np.testing.assert_allclose(cmd.applied[:3], [0.25, 0.5, -0.25], atol=1e-6)


def test_applied_action_reproduces_the_clipped_target() -> None:
    f = make_filter(workspace_max=(0.51, 0.35, 0.55))
    first = f.filter(START, action(1.0, 0.3), 0.0)
    again = f.filter(START, first.applied, 0.0)
    np.testing.assert_allclose(again.target_pose, first.target_pose, atol=1e-6)
    assert not again.clipped


def test_a_target_outside_the_box_is_never_pushed_out_or_pulled_in_unasked() -> None:
    f = make_filter(workspace_max=(0.45, 0.35, 0.55))  # START x = 0.5 is already outside
    assert not f.in_workspace(START)
    outward = f.filter(START, action(1.0), 0.0)
    assert outward.target_pose[0] == pytest.approx(0.5) and outward.clipped and outward.applied[0] == 0.0
    still = f.filter(START, action(), 0.0)
    assert still.target_pose[0] == pytest.approx(0.5) and not still.clipped
    inward = f.filter(START, action(-1.0), 0.0)
    assert inward.target_pose[0] == pytest.approx(0.48) and not inward.clipped


# ---- orientation limit ----------------------------------------------------------------------------------


def test_orientation_stays_within_the_deviation_from_nominal() -> None:
    f = make_filter(nominal_orientation=tuple(DOWN), max_orientation_deviation_rad=0.35)
    pose = START.copy()
    limited_steps = 0
    for _ in range(10):
        before = pose
        cmd = f.filter(pose, action(0, 0, 0, 1.0, 0.5), 0.0)
        pose = cmd.target_pose
        assert rot.angle_between(pose[3:], DOWN) <= 0.35 + 1e-9
        step = rot.to_rotvec(rot.multiply(pose[3:], rot.conjugate(before[3:])))
        assert np.all(np.abs(step) <= STEP_RAD + 1e-9)  # still rate limited
        np.testing.assert_allclose(cmd.applied[3:6], step / STEP_RAD, atol=1e-6)
        if cmd.clipped:
            limited_steps += 1
            assert any("orientation" in r and "from nominal" in r for r in cmd.reasons)
    assert limited_steps >= 7
    assert rot.angle_between(pose[3:], DOWN) == pytest.approx(0.35)


def test_an_orientation_beyond_the_limit_is_not_pushed_further() -> None:
    f = make_filter(nominal_orientation=tuple(DOWN), max_orientation_deviation_rad=0.2)
    tilted = START.copy()
    tilted[3:] = rot.apply_rotvec(DOWN, [0.5, 0.0, 0.0])
    out = f.filter(tilted, action(0, 0, 0, 1.0), 0.0)
    assert rot.angle_between(out.target_pose[3:], DOWN) <= 0.5 + 1e-9
    back = f.filter(tilted, action(0, 0, 0, -1.0), 0.0)
    assert rot.angle_between(back.target_pose[3:], DOWN) == pytest.approx(0.4)
    assert not back.clipped


# ---- gripper --------------------------------------------------------------------------------------------


def test_gripper_is_absolute_and_kept_in_range() -> None:
    assert make_filter().filter(START, action(0, 0, 0, 0, 0, 0, -1.0), 0.5).gripper == 0.0
    assert make_filter().filter(START, action(0, 0, 0, 0, 0, 0, 1.0), 0.5).gripper == 1.0
    cmd = make_filter(gripper_min=0.1, gripper_max=0.8).filter(START, action(0, 0, 0, 0, 0, 0, 1.0), 0.5)
    assert cmd.gripper == pytest.approx(0.8) and cmd.clipped
    assert cmd.applied[6] == pytest.approx(0.6)
    assert "gripper" in cmd.reasons[0]


# ---- bad data -------------------------------------------------------------------------------------------

BAD_ACTIONS = {
    "nan": (action(0.1, float("nan")), "non-finite values (dy=nan)"),
    "inf": (action(0, 0, 0, 0, 0, 0, float("inf")), "gripper=inf"),
    "neg_inf": (action(float("-inf")), "dx=-inf"),
    "short": (np.zeros(6, np.float32), "shape (6,)"),
    "batched": (np.zeros((1, 7), np.float32), "shape (1, 7)"),
    "scalar": (np.float64(0.0), "numpy array"),
    "zero_d": (np.array(0.5), "shape ()"),
    "list": ([0.0] * 7, "numpy array, got list"),
    "none": (None, "numpy array, got NoneType"),
    "ints": (np.zeros(7, np.int64), "dtype int64"),
    "objects": (np.array([0.0] * 6 + [None], dtype=object), "dtype object"),
    "complex": (np.zeros(7, np.complex128), "dtype complex128"),
    "strings": (np.array(["0"] * 7), "dtype <U1"),
}


@pytest.mark.parametrize("name", sorted(BAD_ACTIONS))
def test_bad_actions_hold_with_a_reason_and_no_motion(name: str) -> None:
    bad, message = BAD_ACTIONS[name]
    cmd = make_filter().filter(START, bad, 0.3)
    assert cmd.held and not cmd.clipped
    np.testing.assert_array_equal(cmd.target_pose, START)
    assert cmd.gripper == 0.3
    np.testing.assert_array_equal(cmd.applied, np.zeros(7, np.float32))
    assert len(cmd.reasons) == 1 and cmd.reasons[0].startswith("action rejected, holding: ")
    assert message in cmd.reasons[0]


def test_check_action_accepts_float_arrays_of_the_right_shape() -> None:
    assert check_action(np.zeros(7, np.float16), (7,)) is None
    assert check_action(np.zeros(7), (7,)) is None


@pytest.mark.parametrize("pose", [np.zeros(7), np.full(7, np.nan), np.zeros(6), np.array([0, 0, 0, 0, 0, 0, np.inf])])
def test_an_impossible_current_target_is_a_driver_bug(pose: np.ndarray) -> None:
    with pytest.raises(SafetyError, match="current target pose"):
        make_filter().filter(pose, action(), 0.0)


# ---- limits at and just over their boundaries -------------------------------------------------------------


def config_error(**fields: Any) -> str:
    with pytest.raises(ConfigError) as info:
        SafetyConfig(**fields)
    return str(info.value)


@pytest.mark.parametrize(
    ("field", "bad", "bounds"),
    [
        ("max_translation_per_step_m", 0.2501, "[1e-06, 0.25]"),
        ("max_translation_per_step_m", 0.0, "[1e-06, 0.25]"),
        ("max_rotation_per_step_rad", 1.01, "[1e-06, 1.0]"),
        ("gripper_min", 1.01, "[0.0, 1.0]"),
        ("gripper_min", -0.01, "[0.0, 1.0]"),
        ("gripper_max", 1.01, "[0.0, 1.0]"),
        ("gripper_max", float("inf"), "[0.0, 1.0]"),
    ],
)
def test_a_limit_just_outside_its_range_is_refused_naming_the_field(field: str, bad: float, bounds: str) -> None:
    assert config_error(**{field: bad}) == f"{field} {bad!r} is outside {bounds}"


def test_limits_at_the_ends_of_their_ranges_are_accepted() -> None:
    cfg = SafetyConfig(max_translation_per_step_m=0.25, max_rotation_per_step_rad=1.0, gripper_min=1.0, gripper_max=1.0)
    assert cfg.gripper_min == cfg.gripper_max == 1.0  # a fixed gripper opening: min == max is allowed
    SafetyConfig(max_translation_per_step_m=1e-6, max_rotation_per_step_rad=1e-6, gripper_min=0.0, gripper_max=0.0)
    SafetyConfig(nominal_orientation=(0.0, 0.0, 0.0, 1.0), max_orientation_deviation_rad=math.pi)
    SafetyConfig(nominal_orientation=(0.0, 0.0, 0.0, 1.0), max_orientation_deviation_rad=0.0)


@pytest.mark.parametrize("deviation", [math.pi + 0.01, -0.01, float("nan")])
def test_an_orientation_deviation_outside_zero_to_pi_is_refused(deviation: float) -> None:
    message = config_error(nominal_orientation=(0.0, 0.0, 0.0, 1.0), max_orientation_deviation_rad=deviation)
    assert message == f"max_orientation_deviation_rad {deviation!r} is outside [0.0, {math.pi}]"


def test_orientation_limit_without_a_nominal_orientation_is_refused() -> None:
    message = config_error(max_orientation_deviation_rad=0.3)
    assert message == "nominal_orientation and max_orientation_deviation_rad go together: set both or neither"


@pytest.mark.parametrize("corner", ["workspace_min", "workspace_max"])
@pytest.mark.parametrize("value", [(0.5, float("nan"), 0.3), (0.5, 0.0, float("inf")), (0.5, 0.0)])
def test_a_workspace_corner_must_be_three_finite_numbers(corner: str, value: tuple[float, ...]) -> None:
    message = config_error(**{corner: value})
    assert message == f"{corner} must be three finite numbers (x, y, z in m), got {value!r}"


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_a_workspace_without_width_on_an_axis_is_refused(axis: int) -> None:
    lo = [0.25, -0.35, 0.02]
    hi = [v + 0.1 for v in lo]
    hi[axis] = lo[axis]
    message = config_error(workspace_min=tuple(lo), workspace_max=tuple(hi))
    assert message.startswith(f"workspace {'xyz'[axis]}: workspace_min {lo[axis]} must be below workspace_max")


def test_in_workspace_includes_the_faces_of_the_box_and_nothing_beyond() -> None:
    f = make_filter(workspace_min=(0.25, -0.25, 0.0), workspace_max=(0.75, 0.25, 0.5))
    assert f.in_workspace(START)
    for axis, (lo, hi) in enumerate([(0.25, 0.75), (-0.25, 0.25), (0.0, 0.5)]):
        for value, inside in [(lo, True), (hi, True), (lo - 1e-9, False), (hi + 1e-9, False)]:
            pose = START.copy()
            pose[axis] = value
            assert f.in_workspace(pose) is inside, (axis, value)


def test_an_action_reaching_exactly_the_box_face_is_not_clipped() -> None:
    f = make_filter(workspace_max=(0.5 + STEP_M / 2, 0.35, 0.55))
    at_face = f.filter(START, action(0.5), 0.0)
    assert at_face.target_pose[0] == pytest.approx(0.51) and f.in_workspace(at_face.target_pose)
    over = f.filter(START, action(0.51), 0.0)
    assert over.clipped and over.target_pose[0] == pytest.approx(0.51)


def test_the_applied_action_is_float32_whether_moved_clipped_or_held() -> None:
    f = make_filter()
    for a in (action(0.5), action(3.0), action(float("nan"))):
        cmd = f.filter(START, a, 0.0)
        assert cmd.applied.dtype == np.float32 and cmd.applied.shape == (7,)
    assert f.hold(START, 0.2, "watchdog").applied.dtype == np.float32


def test_hold_keeps_the_target_and_gripper_and_says_why() -> None:
    cmd = make_filter().hold(START, 0.25, "no fresh action")
    assert cmd.held and not cmd.clipped and cmd.reasons == ("no fresh action",)
    np.testing.assert_array_equal(cmd.target_pose, START)
    assert cmd.gripper == 0.25


def test_a_non_finite_position_in_the_current_target_is_a_driver_bug() -> None:
    pose = START.copy()
    pose[1] = np.nan
    with pytest.raises(SafetyError, match="is not 7 finite numbers"):
        make_filter().filter(pose, action(), 0.0)
    with pytest.raises(SafetyError, match="is not 7 finite numbers"):
        make_filter().hold(START[:6], 0.0, "hold")  # six finite numbers are no pose


def test_non_finite_values_are_named_by_component_or_index() -> None:
    bad = np.array([np.nan, np.inf, 0.0], np.float64)
    assert check_action(bad, (3,), ("a",)) == "non-finite values (a=nan, 1=inf)"
    assert check_action(bad, (3,)) == "non-finite values (0=nan, 1=inf)"


def test_clip_reasons_name_the_component_or_its_index() -> None:
    clipped, reasons = clip_unit(np.array([2.0, -3.0, 0.5]), ("a",))
    np.testing.assert_array_equal(clipped, [1.0, -1.0, 0.5])
    assert reasons == ["a +2 is outside [-1, 1], clipped", "1 -3 is outside [-1, 1], clipped"]


def test_a_target_resting_on_the_orientation_limit_is_not_clipped_by_a_zero_action() -> None:
    f = make_filter(nominal_orientation=tuple(DOWN), max_orientation_deviation_rad=0.2)
    on_limit = START.copy()
    on_limit[3:] = rot.apply_rotvec(DOWN, [0.2, 0.0, 0.0])
    cmd = f.filter(on_limit, action(), 0.0)
    assert not cmd.clipped and cmd.reasons == ()
    np.testing.assert_allclose(cmd.target_pose, on_limit, atol=1e-12)


def test_sliding_along_the_orientation_limit_keeps_the_per_axis_rate_limit() -> None:
    f = make_filter(nominal_orientation=tuple(DOWN), max_orientation_deviation_rad=0.2)
    on_limit = START.copy()
    on_limit[3:] = rot.apply_rotvec(DOWN, [0.2 / math.sqrt(2), 0.2 / math.sqrt(2), 0.0])
    cmd = f.filter(on_limit, action(0, 0, 0, 1.0, -1.0), 0.0)  # diagonal, along the edge of the allowed cone
    step = rot.to_rotvec(rot.multiply(cmd.target_pose[3:], rot.conjugate(on_limit[3:])))
    assert np.max(np.abs(step)) == pytest.approx(STEP_RAD)  # the projection back onto the cone is rate limited
    assert rot.angle_between(cmd.target_pose[3:], DOWN) <= 0.2 + 1e-9
    np.testing.assert_allclose(cmd.applied[3:6], step / STEP_RAD, atol=1e-6)
    assert cmd.clipped and "from nominal exceeds the limit" in cmd.reasons[0]
