"""The node kinds: thin adapters that wire a core object (control loop, learning session, reward sources, ...)
to topics, services and parameters. `user.runtime.kinds` names them for the launchers."""
