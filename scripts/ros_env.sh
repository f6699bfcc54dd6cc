# Source this (bash) to use the ROS runtime from this checkout: the ROS 2 userland in .venv, the package
# as scripts/build_ros installed it, and this checkout's sources first (so edits need no rebuild; the
# generated user.msg / user.srv come from install/). DDS stays on this machine.
_user_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="$_user_repo/.venv/bin:$PATH" CMAKE_PREFIX_PATH="$_user_repo/.venv" AMENT_PREFIX_PATH="$_user_repo/.venv"
_user_nounset=$(set -o | awk '$1 == "nounset" {print $2}'); set +u
# shellcheck disable=SC1091
source "$_user_repo/install/setup.bash"
[ "$_user_nounset" = on ] && set -u
export PYTHONPATH="$_user_repo/src${PYTHONPATH:+:$PYTHONPATH}"
export USER_ROS_INSTALL="$_user_repo/install/user"
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST ROS_LOCALHOST_ONLY=1 RMW_IMPLEMENTATION=rmw_fastrtps_cpp
unset _user_repo _user_nounset
