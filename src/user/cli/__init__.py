"""The `user` command line."""
