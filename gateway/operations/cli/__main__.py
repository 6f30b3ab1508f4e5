"""``python -m gateway.operations.cli`` is the same as the ``switchboard`` command."""

from gateway.operations.cli import main

raise SystemExit(main())
