"""Which folders the indexer may read, and who may change what a corpus is built from.

A build names a root folder; the indexer reads every file under it and, once promoted, anyone
allowed to read the corpus can search and download those files. So the root is a privilege:

* ``RAGMESH_CORPUS_ROOTS`` (folders, or ``corpus=/folder`` pairs as the gateway reads them) is the
  allow-list: when set, no build reads outside it, an admin's included. Compose sets the mounted
  corpora folder.
* Unset, the allow-list is the roots of the corpora already registered; only an admin (a
  ``rag:admin`` token, or an operator at the indexer itself, as the CLI is) may register a root
  outside it.
* Only an admin may change an existing corpus's root or visibility, or make a new corpus public;
  a new corpus is internal unless an admin says otherwise.

A root is an absolute path with no ``..`` part, and it is judged by where it really is: symlinks
are resolved before the allow-list check, so a link inside an allowed folder that points outside
it is refused. (Links below the root are the scanner's business: it never follows one out of the
root, see domain/scanning.py.)
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.text_safety import check_text

PUBLIC, INTERNAL = "public", "internal"


def _not_allowed(message: str) -> RagmeshError:
    return RagmeshError(ErrorCode.ROOT_NOT_ALLOWED, message)


def _admin_only(what: str) -> RagmeshError:
    return RagmeshError(ErrorCode.PERMISSION_DENIED, f"{what} needs rag:admin")


def allowed_folders(entries: Iterable[str]) -> list[str]:
    """The folders of ``RAGMESH_CORPUS_ROOTS`` entries (``/folder`` or ``corpus=/folder``)."""
    return [entry.partition("=")[2].strip() if "=" in entry else entry.strip()
            for entry in entries if entry.strip()]


def _real(folder: str) -> Path | None:
    try:
        return Path(folder).resolve(strict=True)
    except (OSError, RuntimeError):
        return None


class CorpusRootPolicy:
    def __init__(self, configured: Iterable[str] = ()) -> None:
        self.configured = [folder for folder in allowed_folders(configured)]

    def resolve(self, root: str, *, registered: Iterable[str], admin: bool) -> str:
        """The real folder a build of ``root`` reads; ROOT_NOT_ALLOWED when it may not."""
        check_text(root, "corpus.root")
        path = PurePosixPath(root)
        if not path.is_absolute():
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "the corpus root must be an absolute path")
        if ".." in path.parts:
            raise _not_allowed("the corpus root may not contain '..'")
        real = _real(root)
        if real is None or not real.is_dir():
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "the corpus root is not a folder")
        if self.configured:
            allowed, rule = self.configured, "outside RAGMESH_CORPUS_ROOTS"
        elif admin:
            return str(real)
        else:
            allowed, rule = list(registered), "not under a registered corpus root (registering one needs rag:admin)"
        for folder in allowed:
            base = _real(folder)
            if base is not None and real.is_relative_to(base):
                return str(real)
        raise _not_allowed(f"the corpus root is {rule}")

    @staticmethod
    def check_change(*, known_root: str, known_visibility: str, root: str, visibility: str,
                     admin: bool) -> None:
        """An existing corpus keeps its root and visibility unless an admin changes them."""
        if admin:
            return
        if root and _real(root) != _real(known_root):
            raise _admin_only("changing the root of an existing corpus")
        if visibility and visibility != known_visibility:
            raise _admin_only("changing the visibility of a corpus")

    @staticmethod
    def new_visibility(visibility: str, *, admin: bool) -> str:
        """A new corpus is internal unless an admin asks for public."""
        if visibility == PUBLIC and not admin:
            raise _admin_only("a public corpus")
        return visibility or INTERNAL
