"""user: online policy learning on real robots, on ROS 2 (rclpy) or ROS-free over Zenoh."""

from pkgutil import extend_path

__version__ = "0.1.0"

# On ROS 2, `user.msg` and `user.srv` are the message modules rosidl generates into the installed package
# folder. A source checkout placed before that folder on PYTHONPATH still finds them there.
__path__ = extend_path(__path__, __name__)
