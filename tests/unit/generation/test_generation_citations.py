"""CitationChecker: citations must exist, quotes must be copied, URLs must come from the sources."""

from __future__ import annotations

from ragmesh_generation.citations import CitationChecker, cited_ids, normalize_url, quoted_spans, urls_in
from ragmesh_generation.domain import EvidenceSource

S1 = EvidenceSource("S1", "Install", "Guide > Install", "https://docs.example.com/install",
                    "Run the installer with\n   administrator   rights. See https://example.com/faq#admin for help.")
S2 = EvidenceSource("S2", "Config", "Guide > Config", "",
                    "The default port is 8080 & it can be changed in settings.toml.")
S3 = EvidenceSource("S3", "中文", "指南", "", "默认端口是 8080，可以在配置文件中修改。")
checker = CitationChecker([S1, S2, S3])


def kinds(text: str) -> list[str]:
    return [p.kind for p in checker.check(text).problems]


def test_valid_segment_with_exact_quote() -> None:
    check = checker.check('The docs say "run the installer with administrator rights" [S1].')
    assert check.ok
    assert check.cited == ("S1",)


def test_citation_lists_and_order() -> None:
    assert cited_ids("A [S2]. B [S1, S2]. C [S3; S1]") == ["S2", "S1", "S3"]
    assert checker.check("Port and install [S2, S1].").cited == ("S2", "S1")


def test_no_citation_is_a_problem() -> None:
    assert kinds("The default port is 8080.") == ["no_citation"]


def test_unknown_source_id() -> None:
    check = checker.check("The port is 8080 [S2][S9].")
    assert [p.kind for p in check.problems] == ["unknown_source"]
    assert check.problems[0].source_ids == ("S9",)


def test_fabricated_quote() -> None:
    assert kinds('The docs say "run the installer as root" [S1].') == ["unsupported_quote"]


def test_quote_from_a_source_that_is_not_cited() -> None:
    # The words exist, but in S2, and only S1 is cited.
    assert kinds('The docs say "the default port is 8080" [S1].') == ["unsupported_quote"]
    assert checker.check('The docs say "the default port is 8080" [S1][S2].').ok


def test_quote_matching_ignores_whitespace_case_and_html_escaping() -> None:
    assert checker.check('"Run the installer with administrator rights." [S1]').ok
    assert checker.check('“8080 &amp; it can be changed” [S2]').ok
    assert checker.check('"8080 & it can be changed" [S2]').ok


def test_quote_with_ellipsis_needs_each_part() -> None:
    assert checker.check('"Run the installer ... administrator rights" [S1]').ok
    assert kinds('"Run the installer … root rights" [S1]') == ["unsupported_quote"]


def test_cjk_quotes() -> None:
    assert checker.check("文档说「默认端口是 8080」[S3]。").ok
    assert checker.check("文档说『可以在配置文件中修改』[S3]。").ok
    assert kinds("文档说「默认端口是 9090」[S3]。") == ["unsupported_quote"]
    assert quoted_spans("「一」和“二”和\"三\"") == ["一", "二", "三"]


def test_url_must_come_from_the_sources() -> None:
    assert kinds("Download it from https://evil.example.net/setup.exe [S1].") == ["foreign_url"]
    # The source's own URL, and a URL inside its text, with harmless differences.
    assert checker.check("See https://docs.example.com/install/ [S1].").ok
    assert checker.check("See https://EXAMPLE.com/faq [S1].").ok
    assert checker.check("See [the FAQ](https://example.com/faq#admin) [S1].").ok


def test_url_helpers() -> None:
    assert urls_in("see https://a.example/x?y=1&amp;z=2, then (https://b.example/).") == [
        "https://a.example/x?y=1&z=2", "https://b.example/"]
    assert normalize_url("HTTPS://A.Example/Path/#frag") == "https://a.example/Path"


def test_several_problems_are_all_reported() -> None:
    assert kinds('"made up" at https://nowhere.example [S7]') == [
        "unknown_source", "unsupported_quote", "foreign_url"]


def test_quotes_without_words_prove_nothing_but_single_words_are_checked() -> None:
    assert checker.check('The default port, "--" or ",", can be changed [S2].').ok
    assert checker.check('Write "8080" in "settings.toml" [S2].').ok
    assert kinds('Set "port" and "tls" [S2].') == ["unsupported_quote"]  # S2 never says "tls"
