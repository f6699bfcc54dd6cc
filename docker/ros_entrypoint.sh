#!/usr/bin/env bash
# The ROS 2 image's entrypoint: Humble, then the colcon install of `user` (user.msg, user.srv, share/user,
# lib/user/user_node), then the command (`ros2 launch user bringup.launch.py ...`, `user bridge ...`).
set -e
# shellcheck disable=SC1091
source /opt/ros/humble/setup.bash
# shellcheck disable=SC1091
source /ws/install/setup.bash
exec "$@"
