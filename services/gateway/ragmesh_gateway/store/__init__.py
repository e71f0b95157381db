"""The gateway's PostgreSQL schema ``gateway``: its migrations (``migrations/*.sql``) and ``database``
(how they are applied, how driver failures surface). The stores themselves live with what they
store: tokens and grants in ``access/``, feedback in ``feedback/``.
"""
