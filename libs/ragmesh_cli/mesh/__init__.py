"""The embedded mesh that `ragmesh up` runs: the model runtime and five services as processes on
127.0.0.1 (processes), the embedded PostgreSQL and Redis (stores), the state folder and its records
(lifecycle), restarts of a child that dies (supervisor), and the `up`/`down` commands (commands).

Tests and benchmarks start a mesh with ``Mesh(state_dir=..., ports=MeshPorts(base)).start()``.
"""

from ragmesh_cli.mesh.processes import SERVICES, Mesh, MeshPorts, generator_env

__all__ = ["SERVICES", "Mesh", "MeshPorts", "generator_env"]
