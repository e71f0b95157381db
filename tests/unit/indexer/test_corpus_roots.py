"""Which folders a build may read (ragmesh_indexer.corpus_roots): every escape is refused with a
code before a file is opened, and only an admin may widen what the indexer reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_indexer.corpus_roots import CorpusRootPolicy, allowed_folders


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    """corpora/{docs,internal}, a secret folder beside them, and links inside docs pointing out."""
    corpora = tmp_path / "corpora"
    for name in ("docs", "internal", "docs/sub"):
        (corpora / name).mkdir(parents=True)
    secret = tmp_path / "secret"
    secret.mkdir()
    (corpora / "docs" / "escape").symlink_to(secret, target_is_directory=True)
    (corpora / "docs" / "inside").symlink_to(corpora / "docs" / "sub", target_is_directory=True)
    return {"corpora": corpora, "docs": corpora / "docs", "internal": corpora / "internal", "secret": secret}


def refused(call, code: ErrorCode) -> RagmeshError:
    with pytest.raises(RagmeshError) as err:
        call()
    assert err.value.code is code, err.value
    return err.value


def test_configured_roots_bind_everyone_admins_included(tree) -> None:
    policy = CorpusRootPolicy([str(tree["corpora"])])
    assert policy.resolve(str(tree["docs"] / "sub"), registered=[], admin=False) == str(tree["docs"] / "sub")
    for admin in (False, True):
        refused(lambda: policy.resolve(str(tree["secret"]), registered=[], admin=admin), ErrorCode.ROOT_NOT_ALLOWED)


@pytest.mark.parametrize("admin", [False, True])
def test_dot_dot_relative_and_symlink_escapes_are_refused(tree, admin: bool) -> None:
    policy = CorpusRootPolicy([str(tree["corpora"])])
    refused(lambda: policy.resolve(f"{tree['docs']}/../../secret", registered=[], admin=admin),
            ErrorCode.ROOT_NOT_ALLOWED)
    refused(lambda: policy.resolve(f"{tree['docs']}/../internal", registered=[], admin=admin),
            ErrorCode.ROOT_NOT_ALLOWED)  # '..' is refused even where it lands inside
    refused(lambda: policy.resolve("corpora/docs", registered=[], admin=admin), ErrorCode.INVALID_ARGUMENT)
    refused(lambda: policy.resolve(str(tree["docs"] / "escape"), registered=[], admin=admin),
            ErrorCode.ROOT_NOT_ALLOWED)
    refused(lambda: policy.resolve("/etc", registered=[], admin=admin), ErrorCode.ROOT_NOT_ALLOWED)
    refused(lambda: policy.resolve(f"{tree['docs']}/\x00", registered=[], admin=admin), ErrorCode.INVALID_CHARACTER)
    refused(lambda: policy.resolve(str(tree["docs"] / "missing"), registered=[], admin=admin),
            ErrorCode.INVALID_ARGUMENT)
    # A link that stays inside is judged by where it lands, and allowed.
    assert policy.resolve(str(tree["docs"] / "inside"), registered=[], admin=admin) == str(tree["docs"] / "sub")


def test_without_configuration_registered_roots_are_the_allow_list(tree) -> None:
    policy = CorpusRootPolicy([])
    registered = [str(tree["docs"])]
    assert policy.resolve(str(tree["docs"] / "sub"), registered=registered, admin=False) == str(tree["docs"] / "sub")
    refused(lambda: policy.resolve(str(tree["secret"]), registered=registered, admin=False),
            ErrorCode.ROOT_NOT_ALLOWED)
    refused(lambda: policy.resolve(str(tree["docs"] / "escape"), registered=registered, admin=False),
            ErrorCode.ROOT_NOT_ALLOWED)
    # An admin registers a new root (the operator adding a corpus).
    assert policy.resolve(str(tree["secret"]), registered=registered, admin=True) == str(tree["secret"])


def test_root_and_visibility_of_a_corpus_change_only_with_admin(tree) -> None:
    known = {"known_root": str(tree["docs"]), "known_visibility": "internal"}
    CorpusRootPolicy.check_change(**known, root="", visibility="", admin=False)  # a plain rebuild
    CorpusRootPolicy.check_change(**known, root=str(tree["docs"]), visibility="internal", admin=False)
    CorpusRootPolicy.check_change(**known, root=f"{tree['docs']}/", visibility="", admin=False)  # same folder
    refused(lambda: CorpusRootPolicy.check_change(**known, root=str(tree["internal"]), visibility="", admin=False),
            ErrorCode.PERMISSION_DENIED)
    refused(lambda: CorpusRootPolicy.check_change(**known, root="", visibility="public", admin=False),
            ErrorCode.PERMISSION_DENIED)
    CorpusRootPolicy.check_change(**known, root=str(tree["internal"]), visibility="public", admin=True)


def test_new_corpora_are_internal_unless_an_admin_says_public() -> None:
    assert CorpusRootPolicy.new_visibility("", admin=False) == "internal"
    assert CorpusRootPolicy.new_visibility("internal", admin=False) == "internal"
    assert CorpusRootPolicy.new_visibility("", admin=True) == "internal"
    assert CorpusRootPolicy.new_visibility("public", admin=True) == "public"
    refused(lambda: CorpusRootPolicy.new_visibility("public", admin=False), ErrorCode.PERMISSION_DENIED)


def test_the_allow_list_reads_the_gateway_format_too() -> None:
    assert allowed_folders(["/corpora", "handbook@main=/srv/handbook", " ", "api@2 = /srv/api "]) == [
        "/corpora", "/srv/handbook", "/srv/api"]
