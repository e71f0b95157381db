"""The reader of the pages' examples (tests/doc_examples.py) can fail: a drifted example is reported.

What it loosens (ids, versions, timestamps, durations, long floats) must not hide a changed field, a
wrong status, a missing key or a line too many; and every block of README.md and docs/*.md must be
one it can run or one marked with the reason it is not run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from doc_examples import (
    ROOT,
    Bindings,
    Block,
    DocFormatError,
    Shell,
    align,
    blocks_of,
    in_run_order,
    parse_markdown,
    run_block,
    summary,
    user_environment,
)

PAGE = """# A page

<!-- example: not-run reason=docker needs the Compose stack -->
```bash
docker compose up -d
```

<!-- example: none reason=diagram the mesh -->
```
a ──▶ b
```

```
$ curl -s localhost:8080/health/ready
{"status":"ready"}
$ ragmesh index ci --corpus x@1 \\
    --reason "again"
ragmesh: BUILD_FAILED: no text
(exit 1)
$ python - <<'PY'
print("$ not a command")
PY
$ not a command
```

```
just some lines
```
"""


def test_blocks_are_classified_by_their_marker_or_their_shape() -> None:
    blocks = parse_markdown(PAGE, "page.md")
    assert [b.kind for b in blocks] == ["not-run", "none", "session", "unclassified"]
    assert blocks[0].marker.reason == "docker" and blocks[0].marker.note == "needs the Compose stack"
    assert blocks[2].line == 13
    steps = blocks[2].steps()
    assert [s.command.splitlines()[0] for s in steps] == [
        "curl -s localhost:8080/health/ready", "ragmesh index ci --corpus x@1 \\", "python - <<'PY'",
        "not a command"]
    assert steps[1].exit_code == 1 and steps[1].expected == ["ragmesh: BUILD_FAILED: no text"]
    assert steps[2].command.endswith("PY") and steps[2].expected == []
    assert [s.line for s in steps] == [14, 16, 20, 23]
    assert summary(blocks) == {"none:diagram": 1, "not-run:docker": 1, "session": 1, "unclassified": 1}


def test_markers_say_where_a_session_runs_and_in_which_order() -> None:
    page = ("<!-- example: run order=2 -->\n```\n$ echo later\n```\n"
            "<!-- example: run on=offline also=doubles,mesh -->\n```\n$ echo first\n```\n"
            "```\n$ echo second\n```\n")
    blocks = parse_markdown(page, "page.md")
    assert [(b.context, b.also, b.order) for b in blocks] == [
        (None, [], 2), ("offline", ["doubles", "mesh"], 1), (None, [], 1)]
    assert [b.steps()[0].command for b in in_run_order(blocks)] == ["echo first", "echo second", "echo later"]


@pytest.mark.parametrize("marker", [
    "<!-- example: not-run needs Docker -->",  # no reason keyword
    "<!-- example: not-run reason=tedious it takes long -->",  # not a known reason
    "<!-- example: not-run reason=docker -->",  # no words
    "<!-- example: skip reason=docker why -->",  # not a kind
])
def test_a_marker_without_a_known_reason_and_words_is_refused(marker: str) -> None:
    with pytest.raises(DocFormatError, match="page.md:1"):
        parse_markdown(f"{marker}\n```\n$ true\n```\n", "page.md")


def test_a_marker_must_sit_just_before_its_block() -> None:
    with pytest.raises(DocFormatError, match="just before a fenced block"):
        parse_markdown("<!-- example: run on=mesh -->\nSome prose.\n```\n$ true\n```\n", "page.md")


def matches(expected: list[str], stdout: str, stderr: str = "") -> bool:
    alignment, _ = align(expected, stdout, stderr)
    return alignment is not None


RESPONSE = '{"request_id":"0894662e86834bacb301fd54b98a7d25","status":"ready","active_corpora":1,"reason":null}'


def test_an_equal_output_matches_and_what_varies_is_loosened() -> None:
    other_id = RESPONSE.replace("0894662e86834bacb301fd54b98a7d25", "ef4acd508d594311bfbaf1bad525e4f5")
    assert matches([RESPONSE], other_id + "\n")
    assert matches(["ragmesh: built v20261130035725239-5aa80c in 1.2s"], "ragmesh: built v20271201000000000-abcdef in 40s")
    assert matches(['{"created_at": "2026-11-30T04:24:58.241964+00:00"}'], '{"created_at": "2027-01-02T03:04:05.6+00:00"}')


@pytest.mark.parametrize("drifted", [
    RESPONSE.replace('"status":"ready"', '"status":"degraded"'),  # a changed field
    RESPONSE.replace('"active_corpora":1,', ""),  # a missing key
    RESPONSE.replace('"reason":null', '"reason":null,"extra":true'),  # a key more
    RESPONSE.replace('"active_corpora":1', '"active_corpora":2'),  # a number
    RESPONSE + "\n" + RESPONSE,  # a line more
    "",  # nothing at all
])
def test_a_drifted_output_is_reported(drifted: str) -> None:
    assert not matches([RESPONSE], drifted)


def test_a_wrong_status_line_is_reported() -> None:
    page = ["HTTP/1.1 404 Not Found", "content-type: application/json"]
    assert matches(page, "HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\n\r\n")
    assert not matches(page, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n")


def test_a_page_may_leave_out_http_headers_but_not_change_or_drop_one_it_shows() -> None:
    printed = ("HTTP/1.1 401 Unauthorized\r\ndate: Tue, 01 Dec 2026 12:32:29 GMT\r\nserver: uvicorn\r\n"
               "www-authenticate: Bearer realm=\"ragmesh\"\r\ncontent-length: 9\r\n\r\n{\"code\":1}\n")
    assert matches(["HTTP/1.1 401 Unauthorized", 'www-authenticate: Bearer realm="ragmesh"', "", '{"code":1}'], printed)
    assert matches(["HTTP/1.1 401 Unauthorized", '{"code":1}'], printed)  # headers and blank line left out
    assert not matches(["HTTP/1.1 401 Unauthorized", 'www-authenticate: Basic', "", '{"code":1}'], printed)
    assert not matches(["HTTP/1.1 401 Unauthorized", "retry-after: 1", "", '{"code":1}'], printed)
    assert not matches(["HTTP/1.1 401 Unauthorized", '{"code":2}'], printed)
    assert not matches(["HTTP/1.1 401 Unauthorized"], printed)  # the body is not a header


def test_scores_match_to_the_stated_precision_only() -> None:
    page = ['[{"index":1,"score":0.7529827356338501},{"index":0,"score":0.04655211791396141}]']
    assert matches(page, '[{"index":1,"score":0.75298271},{"index":0,"score":0.0465522}]')
    assert not matches(page, '[{"index":1,"score":0.8807970881462097},{"index":0,"score":0.11920291930437088}]')
    assert not matches(page, '[{"index":0,"score":0.7529827356338501},{"index":1,"score":0.04655211791396141}]')


def test_an_ellipsis_stands_for_text_in_a_line_and_for_lines() -> None:
    assert matches(['{"build": {...}, "changed": true}'], '{"build": {"chunks": 18, "state": "built"}, "changed": true}')
    assert not matches(['{"build": {...}, "changed": true}'], '{"build": {"chunks": 18}, "changed": false}')
    assert matches(['{"sources":[{"chunk_id":"c1", ... ,"source_id":"S1", ...}],"basis":"cited"}'],
                   '{"sources":[{"chunk_id":"c1","quote":"q","source_id":"S1","page":null}],"basis":"cited"}')
    assert not matches(['{"sources":[{"chunk_id":"c1", ... ,"source_id":"S1", ...}],"basis":"cited"}'],
                       '{"sources":[{"chunk_id":"c1","quote":"q","source_id":"S2","page":null}],"basis":"cited"}')
    assert matches(["first", "...", "last"], "first\nsecond\nthird\nlast\n")
    assert matches(["first", "   ... (the same report)", "last"], "first\nlast\n")
    assert not matches(["first", "...", "last"], "first\nsecond\n")


def test_stdout_and_stderr_keep_their_own_order_but_may_interleave() -> None:
    page = ["ragmesh: built", "{\"ok\": true}", "ragmesh: done"]
    assert matches(page, '{"ok": true}\n', "ragmesh: built\nragmesh: done\n")
    assert not matches(page, '{"ok": true}\n', "ragmesh: done\nragmesh: built\n")


def test_a_wrapped_line_continues_the_line_before() -> None:
    page = ['{"request_id":"demo-1","results":[{"chunk_id":"x",', '   "quote":"q"}],', ' "hint":null}']
    assert matches(page, '{"request_id":"demo-1","results":[{"chunk_id":"x","quote":"q"}],"hint":null}')
    assert not matches(page, '{"request_id":"demo-1","results":[{"chunk_id":"x","quote":"other"}],"hint":null}')


def test_a_value_seen_once_must_mean_the_same_later_and_feeds_later_commands() -> None:
    bindings = Bindings()
    assert bindings.bind("v20261130035725239-5aa80c", "v20270101000000000-111111") is None
    assert bindings.bind("v20261130035725239-5aa80c", "v20270101000000000-222222")  # changed meaning
    assert bindings.bind("v20261130035748607-5aa80c", "v20270101000000000-111111")  # two names, one value
    assert bindings.bind("rmk_e5ae7c7a0024eaaf_yyjs9k1y...", "rmk_0123456789abcdef_SECRETsecret") is None
    command = "ragmesh index promote --index-version v20261130035725239-5aa80c; export RAGMESH_TOKEN=rmk_e5ae7c7a0024eaaf_..."
    assert bindings.into_command(command) == (
        "ragmesh index promote --index-version v20270101000000000-111111; export RAGMESH_TOKEN=rmk_0123456789abcdef_SECRETsecret")


def shell_for(tmp_path: Path) -> Shell:
    return Shell(cwd=tmp_path, env=user_environment(), substitutions=[("localhost:8080", "localhost:1")])


def run(text: str, tmp_path: Path, shell: Shell | None = None) -> list[str]:
    block = parse_markdown(f"```\n{text}\n```\n", "page.md")[0]
    return [problem for outcome in run_block(block, shell or shell_for(tmp_path)) for problem in outcome.problems]


def test_a_session_runs_in_bash_and_a_drifted_one_is_reported(tmp_path: Path) -> None:
    assert run("$ echo '{\"status\": \"ok\"}'\n{\"status\": \"ok\"}", tmp_path) == []
    assert run("$ echo '{\"status\": \"ok\"}'\n{\"status\": \"degraded\"}", tmp_path)
    assert run("$ false\n", tmp_path) == ["exit status 1, the page says 0"]
    assert run("$ exit 3\n(exit 3)", tmp_path) == []
    assert run("$ echo oops >&2; exit 2\noops\n(exit 3)", tmp_path) == ["exit status 2, the page says 3"]


def test_exports_bindings_and_the_folder_carry_over_and_ports_read_as_on_the_page(tmp_path: Path) -> None:
    shell = shell_for(tmp_path)
    assert run("$ export DEMO=rmk_0123456789abcdef_SECRETsecret; echo \"$DEMO\"\nrmk_e5ae7c7a0024eaaf_yyjs...", tmp_path,
               shell) == []
    assert run("$ echo \"rmk_e5ae7c7a0024eaaf_...\" \"$DEMO\" http://localhost:8080; mkdir sub; cd sub\n"
               "rmk_e5ae7c7a0024eaaf_... rmk_e5ae7c7a0024eaaf_... http://localhost:8080", tmp_path, shell) == []
    assert shell.cwd == tmp_path / "sub"
    assert run("$ echo http://localhost:1\nhttp://localhost:8080", tmp_path, shell) == []


def test_every_block_of_the_pages_is_run_or_marked_with_its_reason() -> None:
    """The whole documentation: an example nobody marked and the reader cannot run fails here, at once."""
    blocks = blocks_of(ROOT)
    unclassified = [f"{b.where} ({b.info or 'no language'}): {b.text.splitlines()[0][:60]!r}"
                    for b in blocks if b.kind == "unclassified"]
    assert not unclassified, ("blocks that are neither a `$` session nor marked "
                              "<!-- example: not-run|none reason=... -->:\n" + "\n".join(unclassified))
    counts = summary(blocks)
    print("doc blocks:", counts)
    assert counts.get("session", 0) > 30


def test_a_block_knows_where_it_is() -> None:
    block = Block(path="docs/api.md", line=54, info="", text="$ true")
    assert block.where == "docs/api.md:54" and block.kind == "session" and block.context is None
