"""The learner's ROS-free core: what it trains (config, the kinds of policy and algorithm), its settings
(`session_config`), what it takes in (`intake`), how it selects inputs, its training loop (async, or sync phases),
publication until training diverges, its checkpoints, health and the run log. The `learner` node
(user.nodes.learner) is a thin adapter over these."""
