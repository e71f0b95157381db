"""Regular expressions for prompt-injection shapes, matched against the normalized TextView.

Every pattern is bounded (no nested unbounded repetition) so a hostile document cannot make the
guard slow. Patterns aim at *imperative* shapes aimed at a model: prose that merely talks about
instructions, roles or tools must not match (tests/unit/gateway/test_injection_guard.py holds the
benign cases that pin this down).
"""

from __future__ import annotations

import re

# Chat-template control tokens and role tags. ``<s>`` only counts in front of a Llama prompt,
# because on its own it is the HTML strikethrough tag.
ROLE_TAG = re.compile(
    r"<\|[A-Za-z][A-Za-z0-9_]{0,39}\|>(?:(?:system|user|assistant|developer)\b)?"
    r"|\[/?INST\]"
    r"|<</?SYS>>"
    r"|</s>"
    r"|<s>(?=\s*(?:\[INST\]|<<SYS>>))"
    r"|</?(?:system|assistant|developer|human|sys|instructions?|system[_-]prompt|im_start|im_end)>",
    re.IGNORECASE,
)

# A line that opens like a chat turn. Case-sensitive on purpose: YAML keys ("system: linux") and
# prose ("the user: ...") stay clean, while "System:" / "SYSTEM PROMPT:" / "### Instruction:" match.
ROLE_LINE = re.compile(
    r"^[ \t>*_#-]{0,8}"
    r"(?P<role>System|SYSTEM|Developer|DEVELOPER|Assistant|ASSISTANT|Human|HUMAN|User|USER"
    r"|系统|助手|用户|系統|助理|用戶)"
    r"(?:[ \t]+(?:[Pp]rompt|PROMPT|[Mm]essage|MESSAGE|[Ii]nstructions?|INSTRUCTIONS?|提示词?|指令))?"
    r"(?:\*\*|__)?[ \t]*[:：]"
    r"|^#{2,}[ \t]*(?P<alpaca>Instruction|Instructions|Response|Input)[ \t]*:",
    re.MULTILINE,
)
HIGH_SEVERITY_ROLES = frozenset({"System", "SYSTEM", "Developer", "DEVELOPER", "系统", "系統"})

# Tool/function-call shapes an agent runtime might execute.
TOOL_CALL_JSON = re.compile(
    r"\{\s*\"(?:tool|tool_name|tool_calls|tool_use|function_call|tool_code)\"\s*:"
    r"|\{\s*\"name\"\s*:\s*\"[^\"\n]{1,100}\"\s*,\s*\"(?:arguments|parameters|input)\"\s*:",
)
TOOL_CALL_TAG = re.compile(
    r"</?(?:tool_call|tool_calls|tool_use|tool_code|tool_result|tool_response|function_call|function_calls"
    r"|invoke|antml:[a-z_]{1,30})\b[^<>\n]{0,200}>"
    r"|<\|python_tag\|>",
    re.IGNORECASE,
)

# ReAct scaffolds: counted only when at least two different labels appear, so a lone
# "Action: none required" in a manual stays clean.
REACT_LABEL = re.compile(
    r"^[ \t]{0,8}(?P<label>Thought|Action Input|Action|Observation|Final Answer|PAUSE)[ \t]*:",
    re.MULTILINE,
)

_EN_TARGET = (
    r"(?:instructions?|prompts?|directions?|directives?|rules|guidelines|messages?|context|commands?"
    r"|orders?|constraints|guardrails|programming|training)"
)
_EN_WHEN = r"(?:previous|prior|above|earlier|preceding|foregoing|former|original|system|existing|initial)"
_EN_FILLER = r"(?:(?:all|any|every|the|your|of|these|those|my|its)\s+){0,4}"
_ZH_WHEN = r"(?:之前|以前|先前|此前|上面|上述|以上|前面|前述|早先|原来|原有|原先|系统)"
_ZH_ALL = r"(?:所有|全部|一切|任何)"
_ZH_TARGET = r"(?:指令|指示|命令|提示词?|规则|說明|说明|要求|设定|設定|限制|约束|規則)"

# English overrides, written in lower case and matched against lower-cased text: a case-sensitive
# scan is about four times faster than re.IGNORECASE on this many alternatives.
_OVERRIDE_EN_SOURCE = (
    rf"\b(?:ignore|disregard|forget|skip|bypass|override|overlook|neglect|abandon)\s+{_EN_FILLER}"
    rf"{_EN_WHEN}\s+{_EN_TARGET}\b"
    rf"|\b(?:ignore|disregard|forget)\s+{_EN_FILLER}{_EN_TARGET}\s+"
    r"(?:above|before|you\s+(?:were|have\s+been)\s+given)\b"
    r"|\b(?:ignore|disregard)\s+(?:all\s+)?(?:of\s+)?(?:the\s+|what\s+is\s+|everything\s+)?"
    r"(?:above|foregoing)\b"
    r"|\bforget\s+(?:all\s+|everything\s+)?(?:about\s+)?(?:your|the)\s+"
    r"(?:instructions|rules|guidelines|training)\b"
    r"|\byou\s+are\s+now\s+(?:dan\b|no\s+longer\b|free\b|unrestricted\b|unfiltered\b|jailbroken\b"
    r"|in\s+(?:developer|god|jailbreak|unrestricted)\s+mode\b"
    r"|an?\s+(?:ai|assistant|model|chatbot|unrestricted|unfiltered|evil|different|new)\b)"
    r"|\bnew\s+(?:system\s+)?instructions?\s*:"
    r"|\b(?:reveal|print|show|output|repeat|leak|disclose|dump)\s+(?:me\s+)?(?:your|the)\s+"
    r"(?:full\s+|entire\s+|hidden\s+|secret\s+|original\s+)?(?:system\s+prompt|initial\s+prompt"
    r"|hidden\s+instructions|system\s+instructions)\b"
    r"|\bfrom\s+now\s+on,?\s+(?:you|the\s+assistant|the\s+ai)\s+(?:are|will|must|should|shall)\b"
    r"|\b(?:do\s+not|don't|never)\s+(?:follow|obey)\s+(?:your|the|any)\s+(?:previous|prior|system|original)\b"
    r"|\b(?:act|behave|respond)\s+as\s+(?:if\s+you\s+(?:are|were)\s+)?(?:an?\s+)?"
    r"(?:unrestricted|unfiltered|jailbroken|dan)\b"
)
OVERRIDE_EN = re.compile(_OVERRIDE_EN_SOURCE)
# For the rare text whose lower-casing changes its length (offsets would no longer line up).
OVERRIDE_EN_ANY_CASE = re.compile(_OVERRIDE_EN_SOURCE, re.IGNORECASE)

# Chinese overrides (simplified and traditional); only scanned when the text holds CJK at all.
OVERRIDE_ZH = re.compile(
    r"(?:忽略|忽視|忽视|无视|無視|不要理会|不理会|别管|忘记|忘記|忘掉|跳过|跳過|绕过|繞過)(?:掉)?(?:你)?"
    rf"(?:{_ZH_WHEN}(?:的)?{_ZH_ALL}?|{_ZH_ALL}{_ZH_WHEN}?)(?:的)?(?:你的)?{_ZH_TARGET}"
    r"|你现在是|你現在是|你现在(?:扮演|作为|的身份是)|假装你是|假裝你是"
    r"|从现在(?:开始|起)[，,]?\s*你(?:是|将|必须|要|需要|只)"
    r"|(?:输出|显示|打印|泄露|告诉我|重复)(?:你的)?(?:系统提示词?|系统指令|初始指令|隐藏指令)"
    r"|新的?指令[：:]"
    r"|不要(?:遵守|遵循|理会)(?:之前|以上|上述|原有|系统)"
)
CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")

# Comments are invisible when rendered; one that talks to a model is an injection carrier.
MARKDOWN_COMMENT = re.compile(r"^\[(?://|comment|_)\]:\s*(?:#|<>)\s*\((?P<body>[^\n]{0,2000})\)[ \t]*$",
                              re.MULTILINE)
ADDRESSES_MODEL = re.compile(
    r"\b(?:AI|LLM|GPT|ChatGPT|Claude|Gemini|Copilot|chatbot|language\s+model|assistant)\b"
    r"|人工智能|大模型|语言模型|助手",
    re.IGNORECASE,
)

# An opening HTML tag; its attributes are then checked for hiding styles.
HTML_OPEN_TAG = re.compile(r"<(?P<tag>[A-Za-z][A-Za-z0-9-]{0,15})(?P<attrs>\s[^<>]{0,1000})>")
HIDING_STYLE = re.compile(
    r"display\s*:\s*none"
    r"|visibility\s*:\s*hidden"
    r"|font-size\s*:\s*0(?:\.0+)?(?:px|pt|em|rem|%)?\s*(?:;|!|$)"
    r"|opacity\s*:\s*0(?:\.0+)?\s*(?:;|!|$)"
    r"|(?:left|top|text-indent|margin-left)\s*:\s*-\d{4,}(?:px|pt|em)?"
    r"|(?:max-)?(?:height|width)\s*:\s*0(?:px)?\s*;[^\"']{0,200}overflow\s*:\s*hidden",
    re.IGNORECASE,
)
STYLE_ATTR = re.compile(r"\bstyle\s*=\s*(?P<q>[\"'])(?P<css>[^\"']{0,1000})(?P=q)", re.IGNORECASE)
HIDDEN_ATTR = re.compile(r"(?:^|\s)hidden(?:\s|=|$)", re.IGNORECASE)
WHITE_COLOR = re.compile(
    r"(?<![-\w])color\s*:\s*"
    r"(?:white|#fff(?:fff)?|rgba?\(\s*255\s*,\s*255\s*,\s*255\s*(?:,\s*1(?:\.0+)?\s*)?\))"
    r"\s*(?:;|!|$)",
    re.IGNORECASE,
)
BACKGROUND = re.compile(r"background(?:-color)?\s*:\s*(?P<value>[^;]{1,60})", re.IGNORECASE)
WHITE_VALUE = re.compile(r"^\s*(?:white|#fff(?:fff)?|rgba?\(\s*255\s*,\s*255\s*,\s*255)", re.IGNORECASE)

# Links and images whose URL smuggles data out through a placeholder the model is asked to fill.
MARKDOWN_LINK = re.compile(r"!?\[[^\]\n]{0,500}\]\(\s*<?(?P<url>[^)\s>]{1,2048})")
HTML_URL_ATTR = re.compile(
    r"<(?:img|a|iframe|script|link|source|video|audio|embed|object)\b[^<>]{0,500}?"
    r"\b(?:src|href|srcset|data|poster)\s*=\s*[\"']?(?P<url>[^\"'\s>]{1,2048})",
    re.IGNORECASE,
)
URL_PLACEHOLDER = re.compile(
    r"\{[^}]{0,200}\}|%7[Bb]|\$\{?[A-Za-z_]|<[^>]{1,100}>|%3[Cc]|\[[^\]]{1,100}\]|%5[Bb]"
    r"|=[A-Z_]{0,20}(?:DATA|SECRET|PASSWORD|TOKEN|QUERY|CONVERSATION|HISTORY|SUMMARY|EMAIL|KEY|INFO|CHAT"
    r"|CONTEXT|PROMPT|MESSAGE)[A-Z_]{0,20}(?:&|#|$)"
)

# Markers this guard writes; the same text arriving in a document is a forgery.
FAKE_MARKER = re.compile(r"\[\[/?untrusted", re.IGNORECASE)

BASE64_BLOB = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/_-]{20,}={0,2}(?![A-Za-z0-9+/=_-])")
