"""``python -m gateway.cli`` is the same as the ``switchboard`` command."""

from gateway.cli import main

raise SystemExit(main())
