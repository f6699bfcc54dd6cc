"""Placement of node groups: robot -> rollout at its site -> learner on an accelerator (or the CPU)."""

from __future__ import annotations

import pytest

from user.config.strict import ConfigError
from user.hardware.descriptor import ResourceDescriptor
from user.hardware.scheduler import MissingResourceError, Placement, load_plan, place, schedule

GIB = 2**30


def robot(rid: str, site: str) -> ResourceDescriptor:
    return ResourceDescriptor(rid, "robot", model="sim", site=site, dof=7, control_rate_hz=10.0)


def gpu(rid: str, site: str, gib: int) -> ResourceDescriptor:
    return ResourceDescriptor(rid, "accelerator", model="gpu", site=site, memory_bytes=gib * GIB)


LAB = [
    robot("franka_left", "lab_a"),
    robot("arx_right", "lab_b"),
    ResourceDescriptor("cam_wrist", "camera", site="lab_a", control_rate_hz=30.0),
    gpu("lab_gpu", "lab_a", 24),
    gpu("cloud_gpu_0", "cloud", 80),
    gpu("cloud_gpu_1", "cloud", 141),
]


def test_rollouts_run_at_their_robots_site_and_the_learner_takes_the_largest_gpu() -> None:
    plan = [
        Placement("learner", needs_accelerator=True, min_accelerator_memory_bytes=40 * GIB),
        Placement("rollout_left", needs_robot_ids=("franka_left",), needs_camera_ids=("cam_wrist",)),
        Placement("rollout_right", needs_robot_ids=("arx_right",)),
        Placement("vla_left", needs_accelerator=True, site="lab_a"),
    ]
    got = place(plan, LAB)
    assert list(got) == ["learner", "rollout_left", "rollout_right", "vla_left"]  # the order given
    assert (got["rollout_left"].site, got["rollout_left"].robots, got["rollout_left"].cameras) == (
        "lab_a",
        ("franka_left",),
        ("cam_wrist",),
    )
    assert got["rollout_left"].accelerator is None
    assert got["rollout_right"].site == "lab_b"
    assert (got["learner"].site, got["learner"].accelerator) == ("cloud", "cloud_gpu_1")
    assert (got["vla_left"].site, got["vla_left"].accelerator) == ("lab_a", "lab_gpu")


def test_site_bound_groups_get_the_site_gpu_before_a_learner_that_can_run_anywhere() -> None:
    resources = [robot("franka_left", "lab_a"), gpu("lab_gpu", "lab_a", 24)]
    plan = [
        Placement("learner", needs_accelerator=True, cpu_fallback=True),
        Placement("rollout_left", needs_robot_ids=("franka_left",), needs_accelerator=True),
    ]
    got = place(plan, resources)
    assert got["rollout_left"].accelerator == "lab_gpu"
    assert got["learner"].accelerator is None
    assert got["learner"].notes and "CPU fallback" in got["learner"].notes[0]


def test_missing_robot_is_named_and_the_other_groups_are_still_placed() -> None:
    plan = [
        Placement("rollout_left", needs_robot_ids=("franka_left",)),
        Placement("rollout_ur5", needs_robot_ids=("ur5_bench",)),
        Placement("learner", needs_accelerator=True),
    ]
    with pytest.raises(MissingResourceError) as info:
        place(plan, LAB)
    err = info.value
    assert "ur5_bench" in str(err) and "rollout_ur5" in str(err)
    assert "no robot 'ur5_bench' is announced" in str(err)
    assert err.missing == ["ur5_bench"]
    assert err.schedule.unplaced == ["rollout_ur5"]
    assert set(err.schedule.assignments) == {"rollout_left", "learner"}
    assert err.schedule.assignments["learner"].accelerator == "cloud_gpu_1"


def test_every_missing_resource_is_named_at_once() -> None:
    plan = [
        Placement("rollout_a", needs_robot_ids=("ghost_1", "ghost_2")),
        Placement("rollout_b", needs_robot_ids=("franka_left",), needs_camera_ids=("cam_missing",)),
        Placement("learner", needs_accelerator=True),
    ]
    result = schedule(plan, [robot("franka_left", "lab_a")])
    assert not result.complete and result.assignments == {}
    assert result.missing_resources == ["an accelerator", "cam_missing", "ghost_1", "ghost_2"]
    learner = next(s for s in result.shortfalls if s.group == "learner")
    assert "no accelerator is announced" in learner.reason and "cpu_fallback" in learner.reason


def test_a_robot_is_driven_by_one_group_only() -> None:
    plan = [Placement("a", needs_robot_ids=("franka_left",)), Placement("b", needs_robot_ids=("franka_left",))]
    result = schedule(plan, LAB)
    assert list(result.assignments) == ["a"]
    assert "already used by group 'a'" in result.shortfalls[0].reason


def test_robots_of_one_group_must_share_a_site() -> None:
    result = schedule([Placement("both", needs_robot_ids=("franka_left", "arx_right"))], LAB)
    assert result.unplaced == ["both"]
    assert "different sites (lab_a, lab_b)" in result.shortfalls[0].reason


def test_pinned_site_and_kind_mismatches_are_explained() -> None:
    result = schedule(
        [
            Placement("pinned", needs_robot_ids=("franka_left",), site="lab_b"),
            Placement("confused", needs_robot_ids=("cam_wrist",)),
        ],
        LAB,
    )
    reasons = {s.group: s.reason for s in result.shortfalls}
    assert reasons["pinned"] == "robot 'franka_left' is at site 'lab_a', the group at 'lab_b'"
    assert reasons["confused"] == "'cam_wrist' is a camera, not a robot"


def test_accelerator_too_small_says_what_is_there() -> None:
    result = schedule([Placement("learner", needs_accelerator=True, min_accelerator_memory_bytes=200 * GIB)], LAB)
    (short,) = result.shortfalls
    assert short.resource == "an accelerator with >= 200.0 GiB"
    assert "largest free one has 141.0 GiB" in short.reason


def test_accelerators_are_not_shared() -> None:
    plan = [Placement("l1", needs_accelerator=True), Placement("l2", needs_accelerator=True)]
    result = schedule(plan, [gpu("g", "cloud", 80)])
    assert result.assignments["l1"].accelerator == "g"
    assert "used by l1" in result.shortfalls[0].reason


def test_plan_from_yaml_data_is_checked() -> None:
    plan = load_plan(
        {
            "placements": [
                {"group": "rollout_left", "needs_robot_ids": ["franka_left"]},
                {"group": "learner", "needs_accelerator": True, "cpu_fallback": True},
            ]
        },
        where="plan.yaml",
    )
    assert plan.placements[0].needs_robot_ids == ("franka_left",)
    assert set(place(plan.placements, LAB)) == {"rollout_left", "learner"}
    with pytest.raises(ConfigError, match=r"plan.yaml: placements\[0\]: unknown key 'needs_robots'"):
        load_plan({"placements": [{"group": "x", "needs_robots": ["a"]}]}, where="plan.yaml")
    with pytest.raises(ConfigError, match="group 'x' is listed twice"):
        load_plan({"placements": [{"group": "x"}, {"group": "x"}]}, where="plan.yaml")
