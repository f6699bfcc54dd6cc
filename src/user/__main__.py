"""`python -m user` is the `user` command."""

from user.cli.main import main

raise SystemExit(main())
