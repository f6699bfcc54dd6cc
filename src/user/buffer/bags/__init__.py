"""The buffer's borders: bags recorded by plain `ros2 bag record` (sqlite3 or MCAP, finished or cut short) imported
whole and once, and stored episodes exported to a plain dataset that needs neither ROS nor this package."""
