"""The Compose project tests/compose drives: `docker compose` with the files and project name that
make compose-test (deploy/compose-test/run) gives in the environment, and what the tests read from
the engine (container state, logs, memory). Every call is the CLI an operator would type.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import signal
import string
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_FILES = "deploy/compose.core.yml deploy/compose.ci.yml"
# Every question the checks send carries this word, so the log check can look for it. Lower-case
# letters only: a word with digits reads as a name (a product, a version), and the extractive
# answerer refuses a question naming something no source holds (docs/answers.md, the coverage rule),
# which "probe3f9a..." was, so the chat check got a refusal (first compose run with that rule on).
NONCE = "probe" + "".join(secrets.choice(string.ascii_lowercase) for _ in range(12))
QUESTION = f"What is the default queue depth of the Quokka scheduler? {NONCE}"
CORPUS = "quokka@main"


class ComposeError(AssertionError):
    pass


@dataclass
class ComposeProject:
    name: str
    files: list[str]
    env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_environment(cls, name: str | None = None) -> ComposeProject:
        return cls(
            name=name or os.environ.get("RAGMESH_COMPOSE_PROJECT", "ragmesh-compose-test"),
            files=os.environ.get("RAGMESH_COMPOSE_FILES", DEFAULT_FILES).split(),
        )

    def command(self, *args: str) -> list[str]:
        files = [arg for path in self.files for arg in ("-f", path)]
        return ["docker", "compose", "-p", self.name, *files, *args]

    def run(self, *args: str, check: bool = True, timeout: float = 600, env: dict[str, str] | None = None,
            stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            self.command(*args),
            cwd=ROOT,
            env={**os.environ, **self.env, **(env or {})},
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise ComposeError(f"{shlex.join(self.command(*args))} exited {result.returncode}:\n"
                               f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
        return result

    def config(self) -> dict[str, Any]:
        return json.loads(self.run("--profile", "job", "config", "--format", "json").stdout)

    def container_ids(self, service: str) -> list[str]:
        return self.run("ps", "-q", "--all", service).stdout.split()

    def inspect(self, container: str) -> dict[str, Any]:
        out = subprocess.run(["docker", "inspect", container], capture_output=True, text=True, check=True)
        return json.loads(out.stdout)[0]

    def state(self, service: str) -> dict[str, Any]:
        (container,) = self.container_ids(service)
        return self.inspect(container)["State"] | {"RestartCount": self.inspect(container)["RestartCount"]}

    def logs(self, *services: str) -> str:
        result = self.run("logs", "--no-color", "--no-log-prefix", *services, check=False, timeout=120)
        return result.stdout + result.stderr

    def wait_healthy(self, service: str, *, timeout: float) -> float:
        """Seconds until every container of ``service`` is running and healthy."""
        start = time.monotonic()
        while True:
            states = [self.inspect(c)["State"] for c in self.container_ids(service)]
            if states and all(s["Status"] == "running" and s.get("Health", {}).get("Status") == "healthy"
                              for s in states):
                return time.monotonic() - start
            if time.monotonic() - start > timeout:
                raise ComposeError(f"{service} not healthy after {timeout:.0f} s: {states}")
            time.sleep(0.5)

    def crash(self, service: str) -> int:
        """SIGKILL the service's main process, as the kernel's OOM killer or a crash would end it.

        Not `docker kill`: the engine records that as a manual stop, and no restart policy restarts a
        container stopped by hand. Returns the restart count before the crash.
        """
        (container,) = self.container_ids(service)
        details = self.inspect(container)
        pid = details["State"]["Pid"]
        try:
            os.kill(pid, signal.SIGKILL)
        except (PermissionError, ProcessLookupError):
            # The engine is not ours to signal (another user's, or in a VM): a throwaway container in
            # the host's PID namespace sends the same signal.
            subprocess.run(
                ["docker", "run", "--rm", "--pid=host", "--network=none", "--user=0",
                 "--entrypoint=python", details["Config"]["Image"],
                 "-c", f"import os, signal; os.kill({pid}, signal.SIGKILL)"],
                check=True, capture_output=True, timeout=60,
            )
        return details["RestartCount"]

    def memory(self) -> dict[str, str]:
        """`docker stats --no-stream` memory per running container of the project."""
        names = self.run("ps", "--format", "{{.Name}}").stdout.split()
        out = subprocess.run(
            ["docker", "stats", "--no-stream", "--format", "{{.Name}}\t{{.MemUsage}}", *names],
            capture_output=True, text=True, check=True, timeout=120,
        ).stdout
        return dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)


@dataclass
class Stack:
    project: ComposeProject
    base_url: str
    statuses: list[tuple[str, str, int]] = field(default_factory=list)  # every answer through nginx
    tokens: list[str] = field(default_factory=list)  # every token created, for the log check
    facts: dict[str, Any] = field(default_factory=dict)  # what one check learns for the next

    def client(self, token: str | None = None, **kwargs: Any) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}

        def note(response: httpx.Response) -> None:
            self.statuses.append((response.request.method, response.request.url.path, response.status_code))

        return httpx.Client(base_url=self.base_url, headers=headers, timeout=120,
                            event_hooks={"response": [note]}, **kwargs)

    def create_token(self, client: str, *scopes: str) -> str:
        """The operator's way (docs/operations.md): the admin command inside a gateway container."""
        result = self.project.run("exec", "-T", "gateway", "ragmesh", "token", "create",
                                  "--client", client, "--scope", ",".join(scopes))
        token = json.loads(result.stdout)["token"]
        self.tokens.append(token)
        return token
