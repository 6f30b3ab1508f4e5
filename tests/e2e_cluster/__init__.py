"""End to end: several real gateways on one PostgreSQL answer every message once, in order, through the death of one."""
