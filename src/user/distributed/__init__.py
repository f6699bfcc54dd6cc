"""The learner beyond one device: its ranks started by torchrun (`ranks`), the process group they form (`group`),
each rank's share of a global batch (`batch_share`). The core stays ROS-free; only the lead rank talks on the Bus."""
