"""Operations: what an operator runs and reads: the command line (``cli``), ``switchboard doctor``
(``doctor``), ``/health`` and ``/metrics`` (``health``, ``metrics``), ``gateway.log`` (``logs``, ``log_lines``,
``redaction``), the database's health, the instance lock and the version.
"""
