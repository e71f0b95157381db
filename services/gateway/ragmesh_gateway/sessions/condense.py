"""Deterministic condensing of follow-up questions: no model, the same input gives the same query.

A follow-up such as "and how do I change it?" retrieves nothing useful on its own. When a question
*looks dependent* on the conversation, the key terms of the previous user turn and of the section
the previous answer cited first (the last part of its heading path) are put in front of it::

    history:   user "What is the default queue depth of the Quokka scheduler?"
               assistant (cited "Installing Quokka > Configuration")
    question:  "And how do I change it?"
    condensed: "default queue depth Quokka scheduler Configuration — And how do I change it?"

A question looks dependent when it (a) opens like a continuation ("and ...", "what about ...",
"how about ...", "also ..."), (b) holds a pronoun that needs an antecedent (it, its, they, them,
their, these, those, he, she, ...; "this"/"that"/"there" only when they end the question), or
(c) has at most two content words ("the default?"). Mostly-Chinese questions: a pronoun (它, 其,
这个, 那个, 该, ...) or at most four Han characters; their "key terms" are the previous question,
cut to 60 characters, since Chinese has no spaces to split terms on.

Honest limits: these are surface rules. A standalone question that happens to contain "it" is
also prefixed (harmless for retrieval: the extra terms are about the same conversation), and a
dependent question with no pronoun and three content words ("which port is the default") is
searched as asked. The condensed text is sent back to the client (``meta.condensed_question``),
so what was searched is never hidden. ``RAGMESH_CHAT_CONDENSER=llm`` swaps in a model.
"""

from __future__ import annotations

import re

from ragmesh_gateway.sessions.ports import QuestionCondenser, Turn

MAX_TERMS = 10
# Only the first cited section: an answer citing three sections would otherwise pull the search
# towards all three, and the first citation is the one the answer opens with.
MAX_HEADINGS = 1
MAX_CJK_CONTEXT_CHARS = 60
SEPARATOR = " — "

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.'+-]*[A-Za-z0-9+]|[A-Za-z0-9]")
_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_OPENERS = re.compile(
    r"^\s*(and|also|then|but|so|or|plus|what about|how about|what else|same for|and what about)\b",
    re.IGNORECASE,
)
_PRONOUNS = frozenset(
    "it its it's itself they them their theirs themselves these those he him his she her hers "
    "former latter".split()
)
_TRAILING_DEMONSTRATIVE = re.compile(r"\b(this|that|there|one|ones|them)\W*$", re.IGNORECASE)
_CJK_PRONOUNS = ("它", "其", "这个", "那个", "该", "这些", "那些", "他们", "它们")
_STOPWORDS = frozenset(
    """a an the of in on at to for from with by about into onto over under as than and or but if
    then so not no nor is are was were be been being am do does did done doing have has had having
    can could should would will shall may might must what which who whom whose when where why how
    i me my mine we us our ours you your yours this that there here these those any some all each
    every more most much many few very just also too again only own same such other else
    please tell explain show give know want need like get got use used using way ways thing things
    one ones yes""".split()
)


def content_words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text) if w.lower() not in _STOPWORDS and w.lower() not in _PRONOUNS]


def _mostly_chinese(text: str) -> bool:
    return len(_HAN.findall(text)) > len(_WORD.findall(text))


def looks_dependent(question: str) -> bool:
    """Whether a question probably needs the conversation to be understood (rules above)."""
    if _mostly_chinese(question):
        return any(p in question for p in _CJK_PRONOUNS) or len(_HAN.findall(question)) <= 4
    if _OPENERS.match(question) or _TRAILING_DEMONSTRATIVE.search(question.strip()):
        return True
    words = [w.lower() for w in _WORD.findall(question)]
    return bool(_PRONOUNS.intersection(words)) or len(content_words(question)) <= 2


def _last(history: list[Turn], role: str) -> Turn | None:
    return next((t for t in reversed(history) if t.role == role and t.content.strip()), None)


def context_terms(history: list[Turn], question: str) -> list[str]:
    """Key terms of the last user turn, then of the last answer's cited headings (deduplicated,
    case-insensitively, and without words the question already has)."""
    seen = {w.lower() for w in _WORD.findall(question)}
    terms: list[str] = []
    user = _last(history, "user")
    answer = _last(history, "assistant")
    sources = [user.content] if user else []
    if answer is not None:
        # The last heading of each cited path names the section ("Configuration"), its parents only
        # the document; a path without " > " is a title.
        sources += [heading.split(" > ")[-1] for heading in answer.cited_headings[:MAX_HEADINGS]]
    for text in sources:
        for word in content_words(text):
            if word.lower() not in seen and len(terms) < MAX_TERMS:
                seen.add(word.lower())
                terms.append(word)
    return terms


def condense(question: str, history: list[Turn]) -> str:
    question = question.strip()
    if not history or not looks_dependent(question):
        return question
    if _mostly_chinese(question):
        user = _last(history, "user")
        if user is None:
            return question
        return user.content.strip()[:MAX_CJK_CONTEXT_CHARS] + SEPARATOR + question
    terms = context_terms(history, question)
    return f"{' '.join(terms)}{SEPARATOR}{question}" if terms else question


class RuleCondenser(QuestionCondenser):
    """The default condenser: :func:`condense`, deterministic and free."""

    async def condense(self, question: str, history: list[Turn]) -> str:
        return condense(question, history)
