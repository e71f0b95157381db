import pytest

from ragmesh_runtime.generator.sentences import split_sentences


def test_english_sentences_split_at_terminal_punctuation():
    text = "The indexer owns ingestion. Retrieval is separate! Is it fast? Yes, very."
    assert split_sentences(text) == [
        "The indexer owns ingestion.",
        "Retrieval is separate!",
        "Is it fast?",
        "Yes, very.",
    ]


@pytest.mark.parametrize(
    "text",
    [
        "Use a cache, e.g. the Redis one, for speed.",
        "Dr. Smith wrote it in 2020.",
        "The value is 3.5 mm at most.",
        "See J. Doe et al. for details.",
        "Version 1.2.3 is current.",
    ],
)
def test_abbreviations_initials_and_numbers_do_not_split(text):
    assert split_sentences(text) == [text]


def test_chinese_sentences_split_without_spaces():
    assert split_sentences("北京是中国的首都。上海很大！你去过吗？我去过。") == [
        "北京是中国的首都。",
        "上海很大！",
        "你去过吗？",
        "我去过。",
    ]


def test_chinese_closing_quote_stays_with_its_sentence():
    assert split_sentences("他说：“好的。”然后走了。") == ["他说：“好的。”", "然后走了。"]


def test_mixed_english_and_chinese():
    assert split_sentences("RAG 是检索增强生成。It cites sources. 很好。") == [
        "RAG 是检索增强生成。",
        "It cites sources.",
        "很好。",
    ]


def test_markdown_blocks_are_boundaries_and_markers_are_trimmed():
    text = (
        "# Setup\nInstall it\n\n- run make\n- run tests\n1. first step\n"
        "wrapped paragraph line\ncontinues here."
    )
    assert split_sentences(text) == [
        "Install it",
        "run make",
        "run tests",
        "first step\nwrapped paragraph line\ncontinues here.",
    ]


def test_every_sentence_is_a_substring_of_the_text():
    text = "A first one.  A second one!\n\n> quoted line. 中文句子。\n- item"
    for sentence in split_sentences(text):
        assert sentence in text


def test_punctuation_only_pieces_are_dropped():
    assert split_sentences("---\n\n...\n\nReal text.") == ["Real text."]


def test_empty_text_has_no_sentences():
    assert split_sentences("") == []
    assert split_sentences("   \n\n ") == []


def test_code_fences_headings_tables_and_markup_are_not_answer_sentences():
    text = (
        "## Protocol\n\nThe generator reads evidence blocks.\n\n```\n<evidence>\nWhat does it own?\n```\n\n"
        "| a | b |\n|---|---|\n\nA tag like <source id=\"S1\"> is markup.\n\nPlain prose stays."
    )
    assert split_sentences(text) == ["The generator reads evidence blocks.", "A tag like", "is markup.",
                                     "Plain prose stays."]
