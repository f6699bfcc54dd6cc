"""user: online policy learning on real robots, on ROS 2 (rclpy) or ROS-free over Zenoh."""

__version__ = "0.1.0"
