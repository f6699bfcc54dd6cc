"""Foxglove live view of a running deployment (`user view`): every topic the graph announces becomes a Foxglove
channel with its ROS 2 schema (ros2msg), and every sample's CDR bytes are forwarded unchanged."""

from user.viewer.settings import ViewerSettings
from user.viewer.viewer import LiveViewer, ViewerError

__all__ = ["LiveViewer", "ViewerError", "ViewerSettings"]
