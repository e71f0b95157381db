"""What kind of answer a question expects, and whether a unit of evidence can hold one.

Surface rules, English only: "how many", "when", "what year" ask for a number or a date, "who"
for a name. A unit that cannot hold the expected kind of answer ("The team was strong." for "How
many points did they score?") is unlikely to be the answer even when it repeats the question's
words, so the answerer scores it down; so is a code line, unless the question asks how to do something.
"""

from __future__ import annotations

import re

NUMBER, DATE, PERSON = "number", "date", "person"
PRICE, PHONE, EMAIL = "price", "phone", "email"

_NUMBER_QUESTION = re.compile(
    r"\b(how (many|much|long|far|old|big|large|tall|high|wide|deep|often|fast|heavy)|what (percentage|percent|"
    r"number|amount|proportion|fraction|size|age)|what is the (number|amount|size|population|area))\b", re.I)
_DATE_QUESTION = re.compile(r"^\s*when\b|\b(what|which) (year|years|decade|century|date|day|month|time|era)\b|"
                            r"\bin what (year|decade|century)\b", re.I)
_PERSON_QUESTION = re.compile(r"^\s*(who|whom|whose)\b|\bwho (was|is|were|did|had|has)\b", re.I)
_NUMBER_WORDS = (r"one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|"
                 r"sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|"
                 r"hundred|hundreds|thousand|thousands|million|millions|billion|billions|dozen|dozens|half|"
                 r"quarter|once|twice|single|double|triple|several|few")
_HAS_NUMBER = re.compile(rf"\d|\b({_NUMBER_WORDS})\b", re.I)
_MONTHS = r"january|february|march|april|may|june|july|august|september|october|november|december"
_HAS_DATE = re.compile(rf"\d|\b({_MONTHS}|century|centuries|decade|era|age|period|dynasty|reign|today|"
                       r"yesterday|spring|summer|autumn|fall|winter|morning|evening|night|ago|later|"
                       r"before|after|during|until|since)\b", re.I)
# Answers with a form of their own: a price is an amount of money, a phone number a run of digit
# groups, an email address has an @. Evidence that holds no such thing cannot answer the question.
_PRICE_QUESTION = re.compile(r"\b(cost|costs|price|prices|priced|pricing|fee|fees)\b", re.I)
_PHONE_QUESTION = re.compile(r"\b(phone|telephone|fax)\b", re.I)
_EMAIL_QUESTION = re.compile(r"\b(e-?mail|mail) address(es)?\b", re.I)
_HAS_PRICE = re.compile(r"[$€£¥₹]|\b(usd|eur|gbp|jpy|chf|dollars?|euros?|pounds?|cents?|pence|francs?|yen|yuan|"
                        r"rupees?|guilders?|free of charge|for free|at no cost|no charge|gratis)\b|"
                        r"\d\s*(?:per|/)\s*(?:month|year|user|seat)\b", re.I)
# A run of digits, spaces, dots, dashes and brackets; it is a phone number when it holds 7 to 15
# digits and is neither a date (2026-09-14) nor a version (4.2.0).
_DIGIT_RUN = re.compile(r"\+?\(?\d[\d ().-]{5,}\d")
_DATE_OR_VERSION = re.compile(r"^\d{4}-\d{2}-\d{2}$|^\d+(\.\d+)+$")
_HAS_EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+")
_CAPITALISED = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]+")


_PROCEDURE_QUESTION = re.compile(
    r"\b(how (do|can|should|would) (i|we|you)|how to|which (command|flag|option)|what (command|flag|option)|"
    r"command|syntax|example|install|run|start|stop|enable|create|submit|initiali[sz]e|set up|configure)\b", re.I)


# What else makes a code line a possible answer: the question asks for code or a value, or names
# an identifier (``max_parallel``, ``tern.toml``, ``--state``) the way code writes it.
_CODE_QUESTION = re.compile(r"\b(code|snippet|script|value|values|default|defaults|setting|settings|config|"
                            r"configuration|path|file|port|url|variable|flag|format)\b", re.I)
_IDENTIFIER = re.compile(r"`[^`]+`|\b\w+_\w+\b|\b\w+\.\w{2,}\b|(?<!\w)--?\w")

_LARGEST = frozenset("longest largest biggest highest greatest most maximum heaviest oldest latest "
                     "tallest widest deepest".split())
_SMALLEST = frozenset("shortest smallest lowest least fewest minimum lightest earliest youngest "
                      "narrowest".split())
_WORD = re.compile(r"(?<![\w`])[A-Za-z]+(?![\w`])")  # whole words: not the "max" of `max_parallel`


def asks_for_code(question: str) -> bool:
    """Whether a line of a code block can answer: a command, code or a value is asked for.
    Elsewhere a code block's lines are examples (of a config file, a prompt, an output) whose
    words say nothing true of the product ("The indexer service owns document ingestion &amp;
    index builds." in the runtime's prompt example)."""
    return asks_for_procedure(question) or bool(_CODE_QUESTION.search(question) or _IDENTIFIER.search(question))


def extreme(question: str) -> str:
    """``max`` or ``min`` when the question asks for the largest or smallest of something
    ("Which mode has the longest runtime?"), else ``""``."""
    words = {w.lower() for w in _WORD.findall(question)}
    if words & _LARGEST:
        return "max"
    if words & _SMALLEST:
        return "min"
    return ""


def asks_for_procedure(question: str) -> bool:
    """Whether a code line can be the answer: "how do I ...", "which command ...", "install ...".
    A line of an example file is no answer to "what is the default of X?"."""
    return bool(_PROCEDURE_QUESTION.search(question))


def _first_asked(question: str, kinds) -> str:
    """The kind of the first (pattern, kind) whose pattern the question matches, else ``""``."""
    return next((kind for pattern, kind in kinds if pattern.search(question)), "")


def expected_kind(question: str) -> str:
    return _first_asked(question, ((_NUMBER_QUESTION, NUMBER), (_DATE_QUESTION, DATE),
                                   (_PERSON_QUESTION, PERSON)))


def answer_form(question: str) -> str:
    """``price``, ``phone`` or ``email`` when the question asks for a thing of that form
    ("What does the enterprise licence cost?", "What is the phone number of support?"), else ``""``."""
    return _first_asked(question, ((_PHONE_QUESTION, PHONE), (_EMAIL_QUESTION, EMAIL),
                                   (_PRICE_QUESTION, PRICE)))


def holds_form(form: str, text: str) -> bool:
    """Whether ``text`` holds an answer of ``form`` (answer_form) at all."""
    if form == PRICE:
        return bool(_HAS_PRICE.search(text))
    if form == EMAIL:
        return bool(_HAS_EMAIL.search(text))
    if form == PHONE:
        return any(_is_phone(run.group().strip()) for run in _DIGIT_RUN.finditer(text))
    return True


def _is_phone(run: str) -> bool:
    digits = sum(ch.isdigit() for ch in run)
    return 7 <= digits <= 15 and not _DATE_OR_VERSION.match(run)


def can_hold(kind: str, text: str, question: str) -> bool:
    """Whether ``text`` holds something of the expected kind that the question does not."""
    if kind == NUMBER:
        return bool(_HAS_NUMBER.search(_without(text, question)))
    if kind == DATE:
        return bool(_HAS_DATE.search(_without(text, question)))
    if kind == PERSON:
        asked = {w.lower() for w in re.findall(r"[A-Za-z]+", question)}
        return any(w.lower() not in asked for w in _CAPITALISED.findall(text))
    return True


def _without(text: str, question: str) -> str:
    """The text less the numbers the question already states ("in 1999, how many ...")."""
    for number in re.findall(r"\d[\d,.]*", question):
        text = text.replace(number, " ")
    return text
