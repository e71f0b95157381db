import pytest

from ragmesh_runtime.generator.word_chunks import count_word_chunks, word_chunks


@pytest.mark.parametrize(
    "text",
    [
        "The indexer owns ingestion. [S1]",
        "  leading and trailing  ",
        "北京是中国的首都。 [S2]",
        "mixed 中文 and English，ok",
        "INSUFFICIENT_EVIDENCE",
        "",
    ],
)
def test_chunks_join_back_to_the_text(text):
    assert "".join(word_chunks(text)) == text
    assert count_word_chunks(text) == len(word_chunks(text))


def test_words_carry_their_leading_space_and_cjk_is_per_character():
    assert word_chunks("Hello big world") == ["Hello", " big", " world"]
    assert word_chunks("首都。") == ["首", "都", "。"]
    assert word_chunks("INSUFFICIENT_EVIDENCE") == ["INSUFFICIENT_EVIDENCE"]
