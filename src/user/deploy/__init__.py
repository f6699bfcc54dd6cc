"""Deployments: one YAML file describing every node, read by both launchers."""
