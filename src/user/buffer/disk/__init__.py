"""What the buffer's files hold and where they lie: rosbag2 segments (MCAP files a Humble `ros2 bag play` accepts, with
their metadata.yaml), each transition's camera frames on a topic per camera and stored once, the bytes of an MCAP
file scanned for where each message lies, and the buffer directory with its writer lock. Knows nothing of the index."""
