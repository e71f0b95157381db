from ragmesh_runtime.generator.lexical import content_terms, overlap


def test_english_terms_are_stemmed_and_stopwords_dropped():
    terms = content_terms("What does the indexer service own?")
    assert terms == {"index", "servic", "own"}


def test_overlap_is_share_of_question_terms_found():
    question = content_terms("Which service owns indexing?")
    assert overlap(question, content_terms("The indexer service owns it.")) == 1.0
    assert overlap(question, content_terms("Bread needs flour.")) == 0.0
    assert overlap(frozenset(), content_terms("anything")) == 0.0


def test_chinese_uses_character_bigrams():
    terms = content_terms("中国的首都是哪里")
    assert "中国" in terms and "首都" in terms
    assert not any("的" in term for term in terms)
    assert overlap(content_terms("中国的首都"), content_terms("北京是中国的首都。")) == 1.0
