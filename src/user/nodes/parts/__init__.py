"""What the node kinds are made of, beside their cores: the robot node's view for rviz and Foxglove
(`robot_view`, its markers and camera geometry in `robot_markers`) and the monitor node's pace watch and text
(`monitor_pace`, `monitor_text`). They sit inside `nodes` (layer 7), not in a package of their own: the robot view
publishes on the node (`user.runtime.node.Node`) and draws what `user.robot_loop` (layer 6) and `user.sim`
(layer 5) give it, and `nodes` imports it, so no lower layer can hold it and a neighbour at layer 7 would be a
sideways import. Nothing here is a node kind (`user.runtime.kinds` names those)."""
