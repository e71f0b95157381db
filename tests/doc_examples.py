"""The examples of README.md and docs/*.md, read so that tests can run them and compare what they print.

``tests/e2e/test_doc_examples.py`` runs them against the real mesh (and the gateway over its test
doubles, where a page says its outputs came from there); ``tests/unit/test_doc_example_matcher.py``
holds this module to its word: a drifted example (a changed field, a wrong status, a missing key)
is reported.

Every fenced block of a page is one of:

- a **shell session**: lines ``$ command`` (continued by a trailing ``\\`` or a heredoc), each
  followed by what it prints; a last output line ``(exit N)`` is its exit status, 0 otherwise. It
  runs, in the page's context or the one its marker names (``<!-- example: run on=CONTEXT -->``);
- **marked** by an HTML comment on the line just before its fence (blank lines may come between):
  ``<!-- example: not-run reason=KEYWORD why, in words -->`` for an example that cannot run here, or
  ``<!-- example: none reason=KEYWORD what it is -->`` for a block that is no example (a diagram, a
  format), with a keyword from NOT_RUN_REASONS or NOT_EXAMPLE_REASONS. A session's marker
  ``<!-- example: run ... -->`` may say ``on=CONTEXT`` (where it runs), ``also=CONTEXT[,...]`` (run
  it there too, as a reader who skipped the page's earlier sections) and ``order=N`` (run it after
  the blocks of a lower order: it shows the result of one further down; default 1);
- a JSON block after ``<!-- client-config: NAME -->``: run by tests/integration/gateway/test_mcp_clients.py.

Anything else is unclassified, and the tests fail until it is marked.

Output is compared line by line. stdout and stderr are matched separately, each in its own order
(a page shows them interleaved as a terminal did); a line ``...`` stands for any lines, ``...``
inside a line for any text, and a line that starts with white space may continue the line before
it (JSON wrapped for reading). Only what legitimately differs between runs is loosened, each by its
shape: request, token and hash ids (hex), UUIDs, index versions, session ids and tokens are bound
to the value they had the first time, so a later command that uses one gets the real value and a
later output must show that same value again; timestamps, epoch seconds and durations (a number
before ``s`` or ``ms``) match any value; a number with more than four decimals matches within
``FLOAT_TOLERANCE``. Ports and folders of the test's own processes are written back as the page
has them (a context's ``substitutions``). Everything else must be equal.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLOAT_TOLERANCE = 1e-4

# Why an example is not run here; the test counts the marked blocks by these keywords.
NOT_RUN_REASONS = {
    "benchmark": "a measurement: its figures depend on the machine, or it needs datasets outside the repository",
    "docker": "needs a Docker engine or the Compose stack",
    "gpu": "needs a GPU",
    "kubernetes": "needs a Kubernetes cluster",
    "network": "needs a registry or the internet",
    "long-running": "starts a server or the whole mesh and keeps it running",
    "slow": "would add minutes to every run of the suite on 2 cores",
    "browser": "needs a web browser (tests/e2e/test_widget*.py drive headless Chromium instead)",
    "drill": "pauses or kills a part of the mesh every other test uses",
    "suite": "runs the test suite itself",
    "tested": "a transcript of a mesh of its own: the named test checks the same behaviour",
}
NOT_EXAMPLE_REASONS = {
    "diagram": "a picture in text",
    "format": "the shape of a file or message, not a command",
}

_MARKER = re.compile(r"<!--\s*example:\s*(?P<kind>[a-z-]+)(?P<rest>.*?)-->", re.S)
_CLIENT_CONFIG = re.compile(r"<!--\s*client-config:\s*[\w-]+\s*-->")
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+|~~~+)(?P<info>[^`]*)$")
_ATTR = re.compile(r"\s*(?P<key>[a-z-]+)=(?P<value>\"[^\"]*\"|\S+)")
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(?P<word>[A-Za-z_]\w*)\1")
_EXIT = re.compile(r"^\(exit (?P<code>\d+)\)$")
_WILDCARD_LINE = re.compile(r"^(\.\.\.|…)(\s+\(.*\))?$")


class DocFormatError(ValueError):
    """A block or marker this module cannot read; the message names the page and line."""


@dataclass(frozen=True)
class Marker:
    kind: str  # run | not-run | none
    attrs: dict[str, str]
    note: str
    line: int

    @property
    def reason(self) -> str:
        return self.attrs.get("reason", "")


@dataclass
class Step:
    """One ``$ command`` of a session and what the page says it prints."""

    command: str
    expected: list[str]
    exit_code: int
    line: int


@dataclass
class Block:
    path: str  # relative to the repository root
    line: int  # of the opening fence, 1-based
    info: str
    text: str
    marker: Marker | None = None
    client_config: bool = False

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def kind(self) -> str:
        """session | not-run | none | client-config | unclassified."""
        if self.marker is not None and self.marker.kind != "run":
            return self.marker.kind
        if self.client_config and self.info == "json":
            return "client-config"
        if any(line.startswith("$ ") for line in self.text.splitlines()):
            return "session"
        return "unclassified"

    @property
    def context(self) -> str | None:
        return self.marker.attrs.get("on") if self.marker else None

    @property
    def also(self) -> list[str]:
        return [c for c in (self.marker.attrs.get("also", "") if self.marker else "").split(",") if c]

    @property
    def order(self) -> int:
        return int(self.marker.attrs.get("order", 1)) if self.marker else 1

    def steps(self) -> list[Step]:
        return parse_session(self.text, first_line=self.line + 1, where=self.path)


def _parse_marker(text: str, line: int, where: str) -> Marker:
    found = _MARKER.fullmatch(text.strip())
    if not found:
        raise DocFormatError(f"{where}:{line}: unreadable example marker {text.strip()!r}")
    kind, rest = found.group("kind"), found.group("rest")
    if kind not in ("run", "not-run", "none"):
        raise DocFormatError(f"{where}:{line}: example marker kind {kind!r} is none of run, not-run, none")
    attrs: dict[str, str] = {}
    while (attr := _ATTR.match(rest)) is not None:
        attrs[attr.group("key")] = attr.group("value").strip('"')
        rest = rest[attr.end():]
    note = rest.strip()
    if kind in ("not-run", "none"):
        allowed = NOT_RUN_REASONS if kind == "not-run" else NOT_EXAMPLE_REASONS
        if attrs.get("reason") not in allowed:
            raise DocFormatError(f"{where}:{line}: a {kind} marker needs reason= one of {sorted(allowed)}")
        if not note:
            raise DocFormatError(f"{where}:{line}: a {kind} marker says in words why (after reason=...)")
    return Marker(kind=kind, attrs=attrs, note=note, line=line)


def parse_markdown(text: str, path: str) -> list[Block]:
    """The fenced blocks of one page, each with the marker written just before it."""
    lines = text.splitlines()
    blocks: list[Block] = []
    pending: Marker | None = None
    client_config = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if _MARKER.search(line) or line.strip().startswith("<!-- example"):
            start = i
            chunk = line
            while "-->" not in chunk and i + 1 < len(lines):
                i += 1
                chunk += "\n" + lines[i]
            pending = _parse_marker(chunk, start + 1, path)
            i += 1
            continue
        if _CLIENT_CONFIG.search(line):
            client_config = True
        fence = _FENCE.match(line)
        if fence is None:
            if line.strip() and pending is not None:
                raise DocFormatError(f"{path}:{pending.line}: an example marker must come just before a fenced block")
            i += 1
            continue
        indent, mark, info = fence.group("indent"), fence.group("fence"), fence.group("info").strip()
        opening = i + 1
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(mark):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        if i >= len(lines):
            raise DocFormatError(f"{path}:{opening}: a fenced block is never closed")
        blocks.append(Block(path=path, line=opening, info=info, text="\n".join(body), marker=pending,
                            client_config=client_config))
        pending, client_config = None, False
        i += 1
    if pending is not None:
        raise DocFormatError(f"{path}:{pending.line}: an example marker must come just before a fenced block")
    return blocks


def doc_pages(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def blocks_of(root: Path = ROOT) -> list[Block]:
    out: list[Block] = []
    for page in doc_pages(root):
        out.extend(parse_markdown(page.read_text(encoding="utf-8"), str(page.relative_to(root))))
    return out


def parse_session(text: str, *, first_line: int = 1, where: str = "") -> list[Step]:
    lines = text.splitlines()
    steps: list[Step] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("$ "):
            if steps:
                steps[-1].expected.append(line)
            elif line.strip():
                raise DocFormatError(f"{where}:{first_line + i}: a session's first line must be a `$ command`")
            i += 1
            continue
        start = i
        command = [line[2:]]
        heredoc = _HEREDOC.search(line)
        while command[-1].endswith("\\") and i + 1 < len(lines):
            i += 1
            command.append(lines[i])
            heredoc = heredoc or _HEREDOC.search(lines[i])
        if heredoc:
            while i + 1 < len(lines):
                i += 1
                command.append(lines[i])
                if lines[i].strip() == heredoc.group("word"):
                    break
            else:
                raise DocFormatError(f"{where}:{first_line + start}: heredoc {heredoc.group('word')} never ends")
        steps.append(Step(command="\n".join(command), expected=[], exit_code=0, line=first_line + start))
        i += 1
    for step in steps:
        while step.expected and not step.expected[-1].strip():
            step.expected.pop()
        if step.expected and (code := _EXIT.match(step.expected[-1].strip())):
            step.exit_code = int(code.group("code"))
            step.expected.pop()
            while step.expected and not step.expected[-1].strip():
                step.expected.pop()
    return steps


# --- one line of expected output as a pattern -------------------------------------------------------

# (kind, pattern in the page, pattern in the output). "bind": the same page value must stand for the
# same output value everywhere; "any": any value of that shape; "float": a number within tolerance.
_TOKEN_DOC = r"rmk_[0-9a-f]{16}_[A-Za-z0-9_-]*(?:\.\.\.|…)?"
_SHAPES: list[tuple[str, str, str]] = [
    ("bind", _TOKEN_DOC, r"rmk_[0-9a-f]{16}_[A-Za-z0-9_-]+"),
    ("any", r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?",
     r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?"),
    ("bind", r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
     r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"),
    ("bind", r"v\d{17}-[0-9a-f]{6}", r"v\d{17}-[0-9a-f]{6}"),
    ("bind", r"rms_[A-Za-z0-9_-]{32}(?![A-Za-z0-9_-])", r"rms_[A-Za-z0-9_-]{32}"),
    ("bind", r"(?<![0-9A-Za-z])[0-9a-f]{64}(?![0-9A-Za-z])", r"[0-9a-f]{64}"),
    ("bind", r"(?<![0-9A-Za-z])[0-9a-f]{32}(?![0-9A-Za-z])", r"[0-9a-f]{32}"),
    ("bind", r"(?<![0-9A-Za-z])[0-9a-f]{16}(?![0-9A-Za-z])", r"[0-9a-f]{16}"),
    ("any", r"(?<![\d.])1[6-9]\d{8}(?![\d.])", r"\d{10}"),
    ("any", r"(?<![\w.])\d+(?:\.\d+)?(?=m?s\b)", r"\d+(?:\.\d+)?"),
    ("float", r"-?\d+\.\d{5,}(?:[eE][-+]?\d+)?", r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"),
    ("ellipsis", r"[ \t]*(?:\.\.\.|…)[ \t]*", r".*?"),  # the spaces around an ellipsis are the writer's
]
_SHAPE = re.compile("|".join(f"(?P<s{n}>{doc})" for n, (_, doc, _) in enumerate(_SHAPES)))


@dataclass
class LinePattern:
    text: str
    regex: re.Pattern[str]
    groups: list[tuple[str, str]]  # (kind, the page's value), one per capturing group

    def match(self, actual: str) -> list[tuple[str, str, str]] | None:
        """(kind, page value, output value) for every loosened part, or None when the line differs."""
        found = self.regex.fullmatch(actual)
        if found is None:
            return None
        pairs = [(kind, doc, found.group(n + 1)) for n, (kind, doc) in enumerate(self.groups)]
        for kind, doc, value in pairs:
            if kind == "float" and abs(float(doc) - float(value)) > FLOAT_TOLERANCE:
                return None
        return pairs


def compile_line(text: str) -> LinePattern:
    parts: list[str] = []
    groups: list[tuple[str, str]] = []
    pos = 0
    for found in _SHAPE.finditer(text):
        parts.append(re.escape(text[pos:found.start()]))
        index = int(found.lastgroup[1:])
        kind, _, output = _SHAPES[index]
        parts.append(f"({output})")
        groups.append((kind, found.group()))
        pos = found.end()
    parts.append(re.escape(text[pos:]))
    return LinePattern(text=text, regex=re.compile("".join(parts), re.S), groups=groups)


# --- a command's output against the page's -----------------------------------------------------------


_HTTP_STATUS = re.compile(r"^HTTP/\d(?:\.\d)? \d{3}\b")
_HEADER = re.compile(r"^[A-Za-z0-9-]+: ")


class Expected:
    """The page's lines as items: ``line`` (a pattern), ``any`` (a ``...`` line: any lines),
    ``headers`` (any HTTP header lines: after a status line the page shows the headers that matter,
    in order, and may leave out the rest) and ``blank?`` (the blank line before a body the page
    wrote right after the headers)."""

    def __init__(self, lines: list[str]) -> None:
        self.items: list[tuple[str, str]] = []
        in_headers = False
        for line in (line.rstrip() for line in lines):
            if in_headers:
                if _HEADER.match(line):
                    self.items += [("line", line), ("headers", "")]
                    continue
                in_headers = False
                if line.strip():
                    self.items.append(("blank?", ""))
            self.items.append(("any", line) if _WILDCARD_LINE.match(line.strip()) else ("line", line))
            if _HTTP_STATUS.match(line):
                self.items.append(("headers", ""))
                in_headers = True
        if in_headers:
            self.items.append(("blank?", ""))
        self._patterns: dict[tuple[int, int], LinePattern] = {}

    def __len__(self) -> int:
        return len(self.items)

    def kind(self, i: int) -> str:
        return self.items[i][0]

    def text(self, i: int) -> str:
        return self.items[i][1]

    def continuations(self, i: int) -> int:
        """How many lines after ``i`` start with white space (a wrapped line may go on there)."""
        n = 0
        while i + n + 1 < len(self.items) and self.items[i + n + 1][0] == "line" and self.items[i + n + 1][1][:1] in " \t":
            n += 1
        return n

    def pattern(self, i: int, extra: int) -> LinePattern:
        key = (i, extra)
        if key not in self._patterns:
            texts = [self.items[i][1]] + [text.lstrip() for _, text in self.items[i + 1:i + 1 + extra]]
            self._patterns[key] = compile_line("".join(texts))
        return self._patterns[key]


def _clean(text: str) -> list[str]:
    # Trailing white space is invisible on a page (and editors drop it): it never counts.
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


@dataclass
class Alignment:
    pairs: list[tuple[int, str, int, list[tuple[str, str, str]]]]  # (expected index, stream, line, parts)


def align(expected: list[str], stdout: str, stderr: str) -> tuple[Alignment | None, str | None]:
    """Match the page's lines against stdout and stderr, each stream in its own order.

    Returns the alignment, or None and the first page line no try got past."""
    exp = Expected(expected)
    streams = {"stdout": _clean(stdout), "stderr": _clean(stderr)}
    out, err = streams["stdout"], streams["stderr"]
    failed: set[tuple[int, int, int]] = set()
    furthest = [0]
    cache: dict[tuple[int, int, str, int], list | None] = {}

    def line_match(i: int, extra: int, stream: str, j: int):
        key = (i, extra, stream, j)
        if key not in cache:
            cache[key] = exp.pattern(i, extra).match(streams[stream][j])
        return cache[key]

    def solve(i: int, j: int, k: int) -> list | None:
        if (i, j, k) in failed:
            return None
        furthest[0] = max(furthest[0], i)
        if i == len(exp):
            if j == len(out) and k == len(err):
                return []
            failed.add((i, j, k))
            return None
        kind = exp.kind(i)
        if kind in ("any", "headers", "blank?"):
            def takes(line: str) -> bool:
                return kind == "any" or (kind == "headers" and bool(_HEADER.match(line))) or (
                    kind == "blank?" and not line.strip())
            options = [(i + 1, j, k)]
            if j < len(out) and takes(out[j]):
                options.append((i + 1, j + 1, k) if kind == "blank?" else (i, j + 1, k))
            if k < len(err) and takes(err[k]):
                options.append((i + 1, j, k + 1) if kind == "blank?" else (i, j, k + 1))
            for state in options:
                rest = solve(*state)
                if rest is not None:
                    return rest
            failed.add((i, j, k))
            return None
        for extra in range(exp.continuations(i) + 1):
            for stream, index in (("stdout", j), ("stderr", k)):
                if index >= len(streams[stream]):
                    continue
                parts = line_match(i, extra, stream, index)
                if parts is None:
                    continue
                rest = solve(i + 1 + extra, j + (stream == "stdout"), k + (stream == "stderr"))
                if rest is not None:
                    return [(i, stream, index, parts), *rest]
        failed.add((i, j, k))
        return None

    pairs = solve(0, 0, 0)
    if pairs is not None:
        return Alignment(pairs), None
    stuck = next((exp.text(n) for n in range(furthest[0], len(exp)) if exp.kind(n) in ("line", "any")), None)
    return None, stuck


@dataclass
class Bindings:
    """What each page value of a loosened shape stood for in this run (and back)."""

    forward: dict[str, str] = field(default_factory=dict)
    backward: dict[str, str] = field(default_factory=dict)

    def bind(self, doc: str, actual: str) -> str | None:
        """Record doc -> actual; returns a complaint when either side already meant something else."""
        if doc.startswith("rmk_"):
            doc, actual = _token_key(doc), actual
        if self.forward.get(doc, actual) != actual:
            return f"{doc!r} stood for {self.forward[doc]!r} earlier, here for {actual!r}"
        if self.backward.get(actual, doc) != doc:
            return f"{actual!r} appears where the page shows {doc!r}, but earlier where it shows {self.backward[actual]!r}"
        self.forward[doc] = actual
        self.backward[actual] = doc
        return None

    def into_command(self, command: str) -> str:
        def token(found: re.Match[str]) -> str:
            return self.forward.get(_token_key(found.group()), found.group())

        command = re.sub(_TOKEN_DOC, token, command)
        for doc in sorted(self.forward, key=len, reverse=True):
            if not doc.startswith("rmk_"):
                command = command.replace(doc, self.forward[doc])
        return command


def _token_key(doc_token: str) -> str:
    return doc_token[: len("rmk_") + 16 + 1]  # rmk_<id>_ names the token; the page elides the secret


# --- running a session ------------------------------------------------------------------------------------


@dataclass
class Shell:
    """Where a page's sessions run: one shell state per page (exports and the folder carry over)."""

    cwd: Path
    env: dict[str, str]
    substitutions: list[tuple[str, str]] = field(default_factory=list)  # (as the page writes it, here)
    bindings: Bindings = field(default_factory=Bindings)
    timeout_s: float = 180.0

    def to_here(self, text: str) -> str:
        for doc, here in sorted(self.substitutions, key=lambda pair: len(pair[0]), reverse=True):
            text = text.replace(doc, here)
        return text

    def to_page(self, text: str) -> str:
        for doc, here in sorted(self.substitutions, key=lambda pair: len(pair[1]), reverse=True):
            text = text.replace(here, doc)
        return text


@dataclass
class Outcome:
    step: Step
    where: str
    command: str  # as run
    exit_code: int
    stdout: str
    stderr: str
    problems: list[str]
    page_stdout: str = ""  # as the page would show it (the test's ports and folders written back)
    page_stderr: str = ""
    seconds: float = 0.0

    def report(self) -> str:
        shown = "\n".join(f"    {line}" for line in self.step.expected) or "    (nothing)"
        return (f"{self.where} `$ {self.step.command.splitlines()[0]}`:\n  " + "\n  ".join(self.problems)
                + f"\n  the page shows:\n{shown}\n  it printed (exit {self.exit_code}):\n"
                + "\n".join(f"    {line}" for line in _clean(self.stdout)) + "\n  on stderr:\n"
                + "\n".join(f"    {line}" for line in _clean(self.stderr)))


def run_step(step: Step, shell: Shell, where: str) -> Outcome:
    command = shell.bindings.into_command(shell.to_here(step.command))
    with tempfile.NamedTemporaryFile(prefix="doc-env-", delete=False) as handle:
        env_file = handle.name
    script = f'{command}\n__doc_rc=$?\nenv -0 > "{env_file}"\npwd > "{env_file}.cwd"\nexit $__doc_rc\n'
    problems: list[str] = []
    started = time.monotonic()
    # A session of its own, so that a command that never ends (a server started by mistake) is
    # stopped with everything it started, not left running for the rest of the suite.
    process = subprocess.Popen(["bash", "-c", script], cwd=shell.cwd, env=shell.env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = process.communicate(timeout=shell.timeout_s)
        code, stdout, stderr = process.returncode, out.decode(errors="replace"), err.decode(errors="replace")
        _carry_shell_state(shell, Path(env_file))
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        code, stdout, stderr = -1, out.decode(errors="replace"), err.decode(errors="replace")
        problems.append(f"did not finish within {shell.timeout_s:.0f} s")
    finally:
        for leftover in (env_file, env_file + ".cwd"):
            Path(leftover).unlink(missing_ok=True)
    outcome = Outcome(step, where, command, code, stdout, stderr, problems, seconds=time.monotonic() - started)
    if code != step.exit_code and not problems:
        problems.append(f"exit status {code}, the page says {step.exit_code}")
    outcome.page_stdout, outcome.page_stderr = shell.to_page(stdout), shell.to_page(stderr)
    alignment, stuck = align(step.expected, outcome.page_stdout, outcome.page_stderr)
    if alignment is None:
        problems.append(f"output differs from the page at {stuck!r}" if stuck is not None
                        else "it printed more than the page shows")
        _bind_what_matches(step.expected, outcome.page_stdout + "\n" + outcome.page_stderr, shell.bindings)
    else:
        for _, _, _, parts in alignment.pairs:
            for kind, doc, value in parts:
                if kind == "bind" and (complaint := shell.bindings.bind(doc, value)):
                    problems.append(complaint)
    return outcome


def _bind_what_matches(expected: list[str], printed: str, bindings: Bindings) -> None:
    """After a mismatch, still learn the values of the lines that did match (a session id, a
    version), so that the next commands run with them and report their own differences, if any."""
    lines = _clean(printed)
    for text in expected:
        pattern = compile_line(text.rstrip())
        if not pattern.groups:
            continue
        for line in lines:
            if (parts := pattern.match(line)) is not None:
                for kind, doc, value in parts:
                    if kind == "bind" and doc not in bindings.forward and value not in bindings.backward:
                        bindings.bind(doc, value)
                break


def _carry_shell_state(shell: Shell, env_file: Path) -> None:
    try:
        raw = env_file.read_bytes()
        cwd = Path(env_file.with_name(env_file.name + ".cwd").read_text().strip())
    except OSError:
        return  # the command ended the shell itself (exit): nothing to carry
    env = dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)
    for volatile in ("_", "SHLVL", "PWD", "OLDPWD", "__doc_rc"):
        env.pop(volatile, None)
    shell.env = env
    shell.cwd = cwd


def run_block(block: Block, shell: Shell) -> list[Outcome]:
    return [run_step(step, shell, f"{block.path}:{step.line}") for step in block.steps()]


def in_run_order(blocks: Iterable[Block]) -> list[Block]:
    """A page's sessions in the order they run: by ``order=N`` (default 1), then as on the page."""
    return sorted((b for b in blocks if b.kind == "session"), key=lambda b: (b.order, b.line))


def summary(blocks: Iterable[Block]) -> dict[str, int]:
    """Blocks per kind, not-run and none ones per reason keyword."""
    counts: dict[str, int] = {}
    for block in blocks:
        key = block.kind
        if key in ("not-run", "none"):
            key = f"{key}:{block.marker.reason}"
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


def user_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """A newcomer's shell: this checkout's virtual environment first on PATH, no RAGMESH_* settings
    but those given (the test's own environment must not leak into what a page claims)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGMESH_", "PYTEST_"))}
    venv_bin = str(ROOT / ".venv" / "bin")
    env["PATH"] = f"{venv_bin}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(ROOT / ".venv")
    env.update(extra or {})
    return env
