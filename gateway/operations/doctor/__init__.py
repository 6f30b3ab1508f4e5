"""``switchboard doctor``: every check an operator would otherwise do by hand, one line each.

Local checks (``local.py``) read files only: the configuration, the home's
permissions, the database and the free disk space. Network checks ask each
enabled platform whether its token is good (``platforms.py``, plain aiohttp
so no platform library is imported), send the model a one-token request
(``model.py``) and ask the transcription endpoint for its model list
(``transcription.py``), and start each tool server of ``tools.mcp_servers``, list its
tools and stop it again, calling none (``tool_servers.py``). ``runner.py`` runs them in order; ``results.py`` holds
the shape of a result and its rendering.
"""

from gateway.operations.doctor.results import Check, Status, render

__all__ = ["Check", "Status", "render"]
