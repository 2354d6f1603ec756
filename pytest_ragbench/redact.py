"""Secrets never reach disk or the terminal: the values this process knows, and masks.

What is secret:

- the values of the environment variables the plugin reads keys from
  (:data:`KEY_VARIABLES`) and of any variable whose name says it holds a credential
  (``*_API_KEY``, ``*_TOKEN``, ``*PASSWORD``...; long values only, see
  :func:`register_environment`);
- the password of a URL (``scheme://user:password@host``, or the user when there is no
  password) and the values of its credential parameters (``?key=``, ``&api_key=``,
  ``access_token=``...), with the HTTP Basic token that a client makes of its userinfo;
- whatever looks like a credential in any text, known or not: URL userinfo,
  ``name=value`` with a credential name, ``Authorization:`` headers and ``Bearer``/``Basic``
  tokens.

:func:`scrub` masks all of them in a text, :func:`scrub_data` in nested JSON-like data,
:func:`mask_url` in a URL (``https://user:***@host/v1?key=***``). They are applied where
data leaves the process: a record when it is made (``ItemRecord.to_dict``), the journal's
header, the response cache's ``put``, the results document, the terminal summary, failure
reports (JUnit, terminal) and the model clients' errors and replies.

The known values live in this module, for the whole process: secrets come from the
process's environment and from settings read at start-up (:func:`register_urls`), and a
value once known stays masked. Only the standard library is used (plugin start-up).
"""

from __future__ import annotations

import base64
import binascii
import html
import json
import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar
from urllib.parse import parse_qsl, quote, unquote, urlsplit

T = TypeVar("T")
MASK = "***"
# The environment variables the plugin itself reads keys from.
KEY_VARIABLES = ("RAGBENCH_LLM_API_KEY", "RAGBENCH_JUDGE_API_KEY", "RAGBENCH_QDRANT_API_KEY")
# A value shorter than this is masked where it stands (in a URL, after "key="), never by
# value: masking every "test" in a report would mangle it and hide nothing.
MIN_LENGTH = 6
RECORD_IDENTITY = frozenset({"nodeid", "kind", "case_kind", "case_id", "file", "status", "system"})
# Other variables are taken by name (OPENAI_API_KEY, HF_TOKEN, PGPASSWORD...); only values
# this long that look like tokens, so that SORT_KEY=name does not mask every "name".
MIN_ENVIRONMENT_LENGTH = 12
_CREDENTIAL_VARIABLE = re.compile(
    r"(?:API_?KEY|ACCESS_KEY|SECRET_KEY|_KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$")
# A parameter or variable name that holds a credential: the name ends in one of these
# (``api_key``, ``access_token``, ``X-Amz-Signature``; not ``prompt_tokens``).
_CREDENTIAL_NAME = (r"[\w.\-]*?(?:api[_\-]?key|key|token|secret|password|passwd|pwd|auth"
                    r"|authorization|credentials?|signature|sig)")
_IS_CREDENTIAL_NAME = re.compile(rf"(?:{_CREDENTIAL_NAME})\Z", re.IGNORECASE)
# Data keys whose string values are credentials whatever they hold.
_CREDENTIAL_KEY = re.compile(
    r"(?:proxy[_\-])?authorization|(?:x[_\-])?api[_\-]?key|apikey|password|passwd|secret"
    r"|client[_\-]secret|(?:access|refresh|auth|id|bearer)[_\-]token", re.IGNORECASE)

# scheme://user:password@ or scheme://token@ (the password may hold a raw "@")
_USERINFO = re.compile(
    r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^\s/?#@:\"'<>\[\]{}]*)"
    r"(?::(?P<password>[^\s/?#\"'<>{}]*))?@")
_HEADERS = re.compile(
    # Authorization: Bearer x, "authorization": "Basic x", x-api-key: x (headers, echoed)
    r"(?P<header>\b(?:proxy-)?authorization|\bx-api-key|\bapi-key|\bx-auth-token"
    r"|\bx-goog-api-key)(?P<sep>[\"']?\s*[:=]\s*[\"']?)(?P<scheme>(?:bearer|basic|token"
    r"|digest|negotiate|apikey)\s+)?(?P<credential>[^\s\"',;}\]]+)"
    # a bearer token on its own (a word after "Bearer" is prose: "bearer bonds")
    r"|(?P<bearer>\bbearer\s+)(?P<token>[A-Za-z0-9\-._~+/]{8,}=*)"
    # a Basic token on its own: base64 of "user:password"
    r"|(?P<basic>\bbasic\s+)(?P<b64>[A-Za-z0-9+/]{8,}={0,2})(?![\w+/=])",
    re.IGNORECASE)
# name=value with a credential name: ?key=, &api_key=, access_token=, password='x'
# The last three letters of each credential name (key, token, secret, password, passwd,
# pwd, auth, authorization, credential(s), signature, sig): a set lookup before the regex.
_NAME_ENDINGS = frozenset({"key", "ken", "ret", "ord", "swd", "pwd", "uth", "ion", "ial",
                           "als", "ure", "sig"})
_ASSIGNMENT = re.compile(
    rf"(?P<name>(?<![\w.\-]){_CREDENTIAL_NAME})=(?P<quote>[\"']?)(?P<value>[^&#\s\"'<>,;]+)",
    re.IGNORECASE)


class _Known:
    """The secret values known to this process (longest first), replaced by copy on write."""

    def __init__(self) -> None:
        self.values: tuple[str, ...] = ()
        self._lock = threading.Lock()

    def add(self, values: Iterable[str]) -> None:
        forms = {form for value in values for form in _forms(value) if len(form) >= MIN_LENGTH}
        if forms <= set(self.values):
            return
        with self._lock:
            found = forms | set(self.values)
            self.values = tuple(sorted(found, key=lambda v: (-len(v), v)))


_KNOWN = _Known()


def _forms(value: str) -> set[str]:
    """The value, and how it reads inside JSON, HTML and a URL."""
    value = value.strip()
    return {value, json.dumps(value)[1:-1], html.escape(value), quote(value, safe="")}


def register(*values: str | None) -> None:
    """Remember secret values: from now on they are masked wherever they appear."""
    _KNOWN.add(v for v in values if v)


def register_environment(environ: Mapping[str, str] | None = None) -> None:
    """The plugin's key variables, and long values of variables named as credentials."""
    environ = os.environ if environ is None else environ
    values = [environ.get(name) for name in KEY_VARIABLES]
    for name, value in environ.items():
        if name not in KEY_VARIABLES and _CREDENTIAL_VARIABLE.search(name.upper()) \
                and len(value) >= MIN_ENVIRONMENT_LENGTH and not any(c.isspace() for c in value):
            values.append(value)
    register(*values)


def register_url(url: str | None) -> None:
    """The credentials a URL carries: its userinfo, Basic token and credential parameters."""
    if not url:
        return
    found: list[str] = []
    for match in _USERINFO.finditer(url):
        user, password = match.group("user") or "", match.group("password")
        if password is None:  # a token given as the user
            found += [user, unquote(user), _basic(unquote(user), "")]
        else:
            found += [password, unquote(password), _basic(unquote(user), unquote(password)),
                      _basic(user, password)]
    try:
        query = urlsplit(url).query
    except ValueError:
        query = ""
    for name, value in parse_qsl(query, keep_blank_values=False):
        if _IS_CREDENTIAL_NAME.match(name):
            found += [value, quote(value, safe="")]
    register(*found)


def register_urls(urls: Iterable[str | None]) -> None:
    """:func:`register_url` for each URL."""
    for url in urls:
        register_url(url)


def _basic(user: str, password: str) -> str:
    """The token of an HTTP Basic header for ``user:password``."""
    return base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


def _masked_userinfo(match: re.Match[str]) -> str:
    if match.group("password") is None:
        return f"{match.group('scheme')}{MASK}@"
    return f"{match.group('scheme')}{match.group('user')}:{MASK}@"


def _masked_header(match: re.Match[str]) -> str:
    group = match.group
    if group("header") is not None:
        return f"{group('header')}{group('sep')}{group('scheme') or ''}{MASK}"
    if group("bearer") is not None:
        token = group("token")
        return match.group(0) if token.isalpha() else f"{group('bearer')}{MASK}"
    return f"{group('basic')}{MASK}" if _is_basic_token(group("b64")) else match.group(0)


def _masked_assignment(match: re.Match[str]) -> str:
    return f"{match.group('name')}={match.group('quote')}{MASK}"


def _is_basic_token(token: str) -> bool:
    """Base64 that is not a plain word, or that decodes to ``user:password``."""
    if not token.isalpha():
        return True
    if len(token) % 4:
        return False
    try:
        decoded = base64.b64decode(token, validate=True)
    except (binascii.Error, ValueError):
        return False
    return b":" in decoded and decoded.isascii()


def scrub(text: str) -> str:
    """``text`` with every known secret and every credential-looking part masked.

    Cheap substring tests decide which patterns can match at all: most texts (answers,
    SQL, evidence) meet none, and are returned as they are (the same object).
    """
    if len(text) < 5:  # "key=x" is the shortest thing masked
        return text
    for value in _KNOWN.values:
        if value in text:
            text = text.replace(value, MASK)
    if "@" in text and "://" in text:
        text = _USERINFO.sub(_masked_userinfo, text)
    lower = text.lower()
    if "bearer" in lower or "basic" in lower or "authoriz" in lower or "api-key" in lower \
            or "auth-token" in lower:
        masked = _HEADERS.sub(_masked_header, text)  # "Basic income" matches, unchanged
        text = text if masked == text else masked
    if "=" in text and _names_a_credential(lower):
        text = _ASSIGNMENT.sub(_masked_assignment, text)
    return text


def _names_a_credential(lower: str) -> bool:
    """True when an "=" in the (lower-cased) text follows a credential name."""
    at = lower.find("=")
    while at >= 0:
        if lower[at - 3:at] in _NAME_ENDINGS:
            return True
        at = lower.find("=", at + 1)
    return False


def mask_url(url: str | None) -> str | None:
    """A URL fit to show: ``scheme://user:***@host/path?key=***`` (None stays None)."""
    return None if url is None else scrub(url)


def scrub_data(value: T) -> T:
    """Nested dicts, lists and tuples with their strings scrubbed (keys are kept).

    Strings under a credential key (``authorization``, ``api_key``, ``password``...) are
    masked whole. A container in which nothing changed is returned as it is, not copied.
    """
    return _scrub_value(value)


def _scrub_value(value: Any) -> Any:
    kind = type(value)
    if kind is str:
        return scrub(value)
    if kind is dict:
        return _scrub_dict(value, ())
    if kind is list or kind is tuple:
        items: list[Any] | None = None
        for index, item in enumerate(value):
            new = _scrub_value(item)
            if new is not item:
                if items is None:
                    items = list(value)
                items[index] = new
        if items is None:
            return value
        return items if kind is list else tuple(items)
    return value


def _scrub_dict(value: dict[Any, Any], kept: Iterable[str]) -> dict[Any, Any]:
    """A dict scrubbed but for the keys in ``kept``; the same dict when nothing changed."""
    changed: dict[Any, Any] | None = None
    for key, item in value.items():
        kind = type(item)
        if kind is str:
            if key in kept:
                continue
            new = MASK if item and _is_credential_key(key) else scrub(item)
        elif (kind is dict or kind is list or kind is tuple) and item:
            new = _scrub_value(item)
        else:
            continue  # numbers, booleans, None, empty containers
        if new is not item:
            if changed is None:
                changed = dict(value)
            changed[key] = new
    return value if changed is None else changed


def scrub_record(data: dict[str, Any]) -> dict[str, Any]:
    """:func:`scrub_data` for an item record, whose identity fields are left as they are.

    A node id, file or case id is the user's own name for the item (the report is keyed by
    them), not something a model or system said.
    """
    return _scrub_dict(data, RECORD_IDENTITY)


_credential_keys: dict[Any, bool] = {}  # key -> verdict: the same few keys come again and again


def _is_credential_key(key: Any) -> bool:
    verdict = _credential_keys.get(key)
    if verdict is None:
        verdict = type(key) is str and _CREDENTIAL_KEY.fullmatch(key) is not None
        if len(_credential_keys) < 10_000:
            _credential_keys[key] = verdict
    return verdict
