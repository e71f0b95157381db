"""Whether the evidence mentions what a question is about at all.

An answer unit can score well on the words a question shares with the documents' vocabulary
("How do I configure LDAP login for Tern?" against "Tern reads /etc/tern/tern.toml at start.")
while the word the question turns on appears nowhere in what was retrieved. A question whose key
terms are absent from every source cannot be answered from them, whatever the best unit scores:

- a *name* — a word capitalised inside the question, an acronym, a word with digits ("LDAP",
  "Kubernetes", "AWS", "Australia") — found in no source;
- the question's *object* — the words after an article ("a web dashboard") or after the verb of
  "how do I ..." ("configure email notifications"), up to the next function word — when its last
  word (in English the head of the phrase) and one more of its words are found in no source: the
  question is about a thing the evidence never names ("email notifications", "web dashboard"),
  however well its other words match. Not after a question word ("what is the unproven
  assumption ..."): there the phrase names what the answer is, which the source need not say;
- or more than ``max_missing_share`` of the question's content terms found in no source ("What
  is the price?": its only term).

Terms are compared stemmed (``lexical.content_terms``), against each source's text, title and
heading. A name is also found when a word of the sources is the same name misspelt by one letter
("Carslbad", "ARPNET"), starts like it ("European" for "Europe", "Germany" for "German") or is
two of its words written as one ("Superbowl"):
questions are written by people, and a name they mistype is still what the source is about.
Questions mostly in Chinese are not checked (their terms are character bigrams).

What is *not* a key term, because it says what form the answer takes rather than what it is
about: the answer-type words of a question ("how many", "how long", "what number", "the
maximum", "what does X mean", ``ANSWER_FORM``), and a closing clause that names the answer's unit
(", in degrees Celsius?": the source writes °C). A stemmed term is also found as a one-letter
variant ("licence" for "license") or a prefix of four letters or more ("cert" for "certificate");
an acronym is found spelt out ("AAA": "the American Automobile Association").

Given a ``near`` (word_neighbours.py), a missing term also counts as found when a word of the
sources is close to it in meaning, at least ``near_similarity`` ("Earth's" for "planet's"):
paraphrase is how a reader asks about what a source says in its own words.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Callable, Iterable, Sequence

from ragmesh_runtime.generator.lexical import content_terms

_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’]*")
_WORD = re.compile(r"[a-z0-9]+")
_PHRASE_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’]*|[^\sA-Za-z0-9'’]")  # words, and each mark alone
_JOINERS = frozenset({"of", "de", "the", "von", "van", "la", "le", "du"})
# Stems of the words that ask for the answer's form (a count, a length, a value, a meaning), not
# its subject: "How many days ...", "What is the maximum number of connections?".
ANSWER_FORM = frozenset("mani much long far old often number amount percentag percent proport size kind type "
                        "sort mean maximum minimum".split())
# A closing clause that names the unit or form of the answer: ", in degrees Celsius?", ", in miles?".
_FORM_CLAUSE = re.compile(r",\s*(?:in|as|measured in)\s+[^,?]{1,40}\?\s*$", re.I)
# Fewer missing terms than this refuse only when they are all the question has ("What is the
# price?"): one word of a longer question may be a paraphrase; two are another subject.
MIN_MISSING_TERMS = 2
_INITIALS_SKIP = frozenset({"of", "and", "for", "the", "de", "on", "in", "to", "&"})
_QUESTION_WORDS = frozenset("what which who whom whose when where why how in on at for to from by is are was were "
                            "do does did can could should would will".split())
_WH = frozenset("what which who whom whose when where why how".split())
_ARTICLES = frozenset({"a", "an", "the"})
_BE = frozenset("is are was were be been".split())
_AUXILIARIES = frozenset("do does did can could should would will may might must".split())
_PRONOUNS = frozenset("i you we one they he she".split())
# Where a noun phrase's head ends and what it is related to begins ("the company | behind Tern").
_PREPOSITIONS = frozenset("about above across after against along among around as at before behind below beneath "
                          "beside between beyond by despite during for from in inside into like near of off on onto "
                          "outside over per since than through to toward towards under until upon via with within "
                          "without".split())


def question_names(question: str) -> list[list[str]]:
    """The question's names, in phrases: a name is a word capitalised after the question's first
    word, all capitals (two letters or more), or holding a digit among letters; a phrase is a run
    of capitalised words joined by "of", "de", "the" ("Member of Parliament", "Nobel Prize")."""
    tokens = _TOKEN.findall(question)
    phrases: list[list[tuple[int, str]]] = [[]]
    for index, token in enumerate(tokens):
        joins = (phrases[-1] and token.lower() in _JOINERS and index + 1 < len(tokens)
                 and tokens[index + 1][0].isupper())
        if (token[0].isupper() and not (index == 0 and token.lower() in _QUESTION_WORDS)) or joins:
            phrases[-1].append((index, token))
            continue
        phrases.append([(index, token)] if _is_name(token, index) else [])
        phrases.append([])
    return [[token for _, token in phrase] for phrase in phrases if any(_is_name(t, i) for i, t in phrase)]


def _is_name(token: str, index: int) -> bool:
    if len(token) < 2:
        return False
    acronym = token.isupper() and any(ch.isalpha() for ch in token)
    mixed = any(ch.isdigit() for ch in token) and any(ch.isalpha() for ch in token)
    return acronym or mixed or (index > 0 and token[0].isupper())


def _acronym(token: str) -> bool:
    return (token.isupper() and any(ch.isalpha() for ch in token)) or any(ch.isdigit() for ch in token)


# closest(words, candidates) -> each word's largest similarity to a candidate (word_neighbours.py)
NearWords = Callable[[Sequence[str], Sequence[str]], list[float]]


def missing_key_terms(question: str, texts: Iterable[str], max_missing_share: float,
                      near: NearWords | None = None, near_similarity: float = 1.0,
                      require_object: bool = True) -> list[str]:
    """The question's key terms found in none of ``texts``, one per source (its title, heading
    and text), empty when the evidence covers the question."""
    question = _FORM_CLAUSE.sub("?", question)
    terms = content_terms(question) - ANSWER_FORM
    if not terms:
        return []
    texts = list(texts)
    missing = _unfound(question, terms, texts, near, near_similarity)
    if not missing:
        return []
    phrases = question_names(question)
    if phrases:
        runs = [_WORD.findall(_folded(text)) for text in texts]
        # Two words written as one ("Superbowl" for "Super Bowl") count as the name too.
        words = frozenset().union(*runs, *({a + b for a, b in zip(run, run[1:])} for run in runs))
        names = []
        for phrase in phrases:
            absent = [t for t in phrase if t.lower() not in _JOINERS and _absent(t, missing, words)]
            absent = [t for t in absent if not (t.isupper() and _spelt_out(t, texts))]
            present = [t for t in phrase if t.lower() not in _JOINERS and t not in absent]
            # A capitalised word is a name's part when another part of it is found ("Member of
            # Parliament" in a text about Parliament); an acronym stands for itself.
            names.extend(t for t in absent if _acronym(t) or not present)
        if names:
            return names
    if require_object and (phrase := _missing_object(question, missing)):
        return phrase
    if missing == terms:
        return sorted(missing)
    if len(missing) >= MIN_MISSING_TERMS and len(missing) / len(terms) > max_missing_share:
        return sorted(missing)
    return []


def object_phrases(question: str) -> list[list[str]]:
    """The phrases a question asks about, as its words: the content words that follow an article,
    or the verb of "how do I ..." ("do"/"can"/"should" and a pronoun, then the verb), up to the next
    function word or punctuation. An article right after a question word ("What is the ...",
    "Which ...") opens the answer's description, not its subject, and is skipped."""
    tokens = _PHRASE_TOKEN.findall(question)
    lowered = [t.lower() for t in tokens]
    starts = []
    for index, token in enumerate(lowered):
        if token in _ARTICLES and index > 0:
            before = index - 1 - (lowered[index - 1] in _BE)
            if before < 0 or lowered[before] not in _WH:
                starts.append(index + 1)
        elif token in _AUXILIARIES and index + 2 < len(lowered) and lowered[index + 1] in _PRONOUNS:
            starts.append(index + 3)
    phrases = []
    for start in starts:
        end = start
        while end < len(tokens) and content_terms(tokens[end]):
            end += 1
        if end > start:
            phrases.append(tokens[start:end])
    return phrases


def unnamed_object_head(question: str, unit_text: str, texts: Sequence[str], near: NearWords | None = None,
                        near_similarity: float = 1.0) -> list[str]:
    """The head of the question's object (an ``object_phrases`` phrase up to its first preposition:
    "the *company* behind Tern") when every word of it is in no source and near none, and
    ``unit_text`` — the best unit — shares no term with the question other than its names; else
    empty. The unit is then about the name ("Tern is licensed under ..."), not about the thing the
    question asks of it, which no source names."""
    question = _FORM_CLAUSE.sub("?", question)
    terms = content_terms(question)
    names = frozenset().union(*(content_terms(token) for phrase in question_names(question) for token in phrase))
    if not content_terms(unit_text) & terms <= names:
        return []
    missing = _unfound(question, terms, list(texts), near, near_similarity)
    for phrase in object_phrases(question):
        head = []
        for word in phrase:
            if word.lower() in _PREPOSITIONS:
                break
            head.append(word)
        if head and all(content_terms(word) <= missing for word in head):
            return head
    return []


def _unfound(question: str, terms: frozenset[str], texts: list[str], near: NearWords | None,
             near_similarity: float) -> frozenset[str]:
    """The ``terms`` no text spells (nor a variant of), nor holds a word near in meaning to."""
    found = frozenset().union(*(content_terms(text) for text in texts))
    missing = frozenset(t for t in terms - found if not _variant_found(t, found))
    if missing and near is not None and near_similarity < 1.0:
        missing = missing - _found_by_meaning(question, missing, texts, near, near_similarity)
    return missing


def _missing_object(question: str, missing: frozenset[str]) -> list[str]:
    """The words of an object phrase (``object_phrases``) whose last word and at least one more are
    in no source, or empty: the question asks about a thing the evidence never names."""
    for phrase in object_phrases(question):
        absent = [word for word in phrase if content_terms(word) <= missing]
        if len(absent) >= MIN_MISSING_TERMS and absent[-1] == phrase[-1]:
            return absent
    return []


def _found_by_meaning(question: str, missing: frozenset[str], texts: list[str], near: NearWords,
                      similarity: float) -> frozenset[str]:
    """The missing stems whose word, as the question writes it, has a word of the sources at least
    ``similarity`` close in meaning."""
    words = {}
    for token in _TOKEN.findall(question):
        for term in content_terms(token) & missing:
            words.setdefault(term, token)
    candidates = list(dict.fromkeys(token for text in texts for token in _TOKEN.findall(text)))
    closeness = near(list(words.values()), candidates)
    return frozenset(term for term, score in zip(words, closeness) if score >= similarity)


def _variant_found(term: str, found: frozenset[str]) -> bool:
    """A stem the sources hold in another spelling: one letter apart ("licenc", "licens"), or
    one a prefix of the other of four letters or more ("cert", "certif")."""
    if len(term) < 4:
        return False
    for word in found:
        if len(word) >= 4 and (term.startswith(word) or word.startswith(term)):
            return True
        if abs(len(word) - len(term)) <= 1 and len(word) >= 4 and _one_edit(term, word):
            return True
    return False


def _spelt_out(acronym: str, texts: list[str]) -> bool:
    """Whether a source spells ``acronym`` out: capitalised words whose initials it is
    ("AAA": "American Automobile Association"), small joining words skipped."""
    letters = acronym.lower()
    if not 2 <= len(letters) <= 8 or not letters.isalpha():
        return False
    for text in texts:
        run = ""
        for token in _TOKEN.findall(text):
            if token.lower() in _INITIALS_SKIP and run:
                continue
            run = run + token[0].lower() if token[0].isupper() else ""
            if run.endswith(letters):
                return True
    return False


def _absent(token: str, missing: frozenset[str], words: frozenset[str]) -> bool:
    terms = content_terms(token)
    if not terms or len(min(terms, key=len)) < 2 or not terms <= missing:
        return False
    return not _near_any(_folded(token).split("'")[0].split("’")[0], words)


def _folded(text: str) -> str:
    """Lower case, accents dropped ("Maizière" is "maiziere")."""
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def _near_any(name: str, words: frozenset[str]) -> bool:
    if name in words:
        return True
    prefix = max(4, len(name) - 3)
    for word in words:
        if abs(len(word) - len(name)) <= 3 and len(word) >= prefix and word[:prefix] == name[:prefix]:
            return True
        if len(name) >= 4 and abs(len(word) - len(name)) <= 1 and _one_edit(name, word):
            return True
    return False


def _one_edit(a: str, b: str) -> bool:
    """One letter inserted, dropped, replaced, or two neighbours swapped."""
    if a == b:
        return True
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1
                                  and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]])
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    i = 0
    while i < len(short) and short[i] == long_[i]:
        i += 1
    return short[i:] == long_[i + 1:]
