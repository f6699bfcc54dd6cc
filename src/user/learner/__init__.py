"""The learner's ROS-free core: what it trains (config, factory), how it selects inputs, its training loop
and its checkpoints. The `learner` node (user.nodes.learner) is a thin adapter over these."""
