"""Operator commands over the gateway's security stores: ``python -m ragmesh_gateway.admin``."""
