"""redact.py: known secrets and credential-looking text are masked; nothing else is touched.

Values registered here stay known to this test process (the module remembers secrets for
the process), so each test plants fresh random values that no other text contains.
"""

from __future__ import annotations

import base64
import json
import secrets as random_secrets
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_ragbench import redact
from pytest_ragbench.redact import mask_url, scrub, scrub_data
from pytest_ragbench.results.records import ItemRecord
from pytest_ragbench.systems.cache import ResponseCache


def fresh(prefix: str) -> str:
    return f"{prefix}{random_secrets.token_hex(8)}"


@pytest.mark.parametrize(("url", "shown"), [
    ("http://alice:pw-4711@127.0.0.1:9/v1", "http://alice:***@127.0.0.1:9/v1"),
    ("postgresql://bob:p@ss@db.example/sales", "postgresql://bob:***@db.example/sales"),
    ("https://ghp_token123@github.com/org/repo", "https://***@github.com/org/repo"),
    ("https://api.example/v1?key=AIzaSyA-123&alt=json", "https://api.example/v1?key=***&alt=json"),
    ("https://h/v1?x=1&api_key=abc&access_token=def", "https://h/v1?x=1&api_key=***&access_token=***"),
    ("https://h/v1?X-Amz-Signature=abc123&X-Amz-Date=2024", "https://h/v1?X-Amz-Signature=***&X-Amz-Date=2024"),
    ("http://127.0.0.1:8011/v1", "http://127.0.0.1:8011/v1"),
    ("sqlite:////tmp/scores@2024.db", "sqlite:////tmp/scores@2024.db"),
    ("https://h/v1?prompt_tokens=12&design=blue", "https://h/v1?prompt_tokens=12&design=blue"),
    (None, None),
])
def test_urls_are_shown_with_credentials_masked(url: str | None, shown: str | None) -> None:
    assert mask_url(url) == shown
    assert mask_url(shown) == shown  # masking twice changes nothing


@pytest.mark.parametrize(("text", "masked"), [
    ("Authorization: Bearer sk-abc123", "Authorization: Bearer ***"),
    ('{"authorization": "Basic dXNlcjpwYXNz"}', '{"authorization": "Basic ***"}'),
    ("{'Authorization': 'Bearer tok'}", "{'Authorization': 'Bearer ***'}"),
    ("headers: x-api-key: zzz9", "headers: x-api-key: ***"),
    ("retry with bearer eyJhbGciOi.payload.sig", "retry with bearer ***"),
    ("sent Basic YWxpY2U6c2VjcmV0 again", "sent Basic *** again"),
    ("invalid access_token=abc123 given", "invalid access_token=*** given"),
    ("Client(api_key='sk-1', password=\"hunter2\")", "Client(api_key='***', password=\"***\")"),
])
def test_credentials_in_text_are_masked(text: str, masked: str) -> None:
    assert scrub(text) == masked


@pytest.mark.parametrize("text", [
    "Bearer bonds are debt securities.", "Basic information about the basic income.",
    "SELECT name FROM players WHERE id = 7", "prompt_tokens=12 completion_tokens=3",
    "mail me at ann@example.org or see http://example.org/page",
    "The author wrote about authority.", "tokens: 12, key points: three",
])
def test_ordinary_text_is_returned_as_it_is(text: str) -> None:
    assert scrub(text) is text


def test_a_urls_credentials_are_known_in_every_form_it_may_be_echoed() -> None:
    password, key = fresh("pw-@"), fresh("qk-")
    redact.register_url(f"http://alice:{quote(password, safe='')}@h:1/v1?key={key}")
    token = base64.b64encode(f"alice:{password}".encode()).decode()
    for echoed in (password, quote(password, safe=""), key, token):
        assert scrub(f"the server said: {echoed}!") == "the server said: ***!"
    assert scrub(f"sent as alice:{password}") == "sent as alice:***"


def test_the_plugins_key_variables_and_long_credential_variables_are_secrets() -> None:
    judge, openai, short = fresh("sk-judge-"), fresh("sk-proj-"), fresh("")[:8]
    redact.register_environment({"RAGBENCH_JUDGE_API_KEY": judge, "OPENAI_API_KEY": openai,
                                 "SORT_KEY": "name", "PWD": "/home/someone/project-dir",
                                 "SSH_AUTH_SOCK": "/tmp/ssh-abcdefghijkl/agent.1",
                                 "RAGBENCH_LLM_API_KEY": short})
    assert scrub(f"{judge} {openai} {short}") == "*** *** ***"
    for kept in ("name", "/home/someone/project-dir", "/tmp/ssh-abcdefghijkl/agent.1"):
        assert scrub(f"x {kept} y") == f"x {kept} y"


def test_a_secret_is_masked_as_json_and_html_write_it() -> None:
    value = fresh('pw"<&')
    redact.register(value)
    assert value not in scrub(json.dumps({"x": value}))
    assert json.dumps(value)[1:-1] not in scrub(json.dumps({"x": value}))
    import html

    assert html.escape(value) not in scrub(f"<td>{html.escape(value)}</td>")


def test_data_is_scrubbed_without_copying_what_holds_no_secret() -> None:
    clean = {"a": ["x", {"b": "SELECT 1"}], "n": 3, "t": ("p", 1.5)}
    assert scrub_data(clean) is clean
    dirty = {"a": ["x", "Authorization: Bearer sk-9"], "api_key": "plain", "n": 3,
             "nested": {"password": "", "authorization": "Basic abc"}}
    out = scrub_data(dirty)
    assert out == {"a": ["x", "Authorization: Bearer ***"], "api_key": "***", "n": 3,
                   "nested": {"password": "", "authorization": "***"}}
    assert dirty["a"][1] == "Authorization: Bearer sk-9"  # the input is not changed
    assert out["nested"] is not dirty["nested"]


def test_a_record_is_scrubbed_where_it_is_made_but_its_identity_is_kept() -> None:
    secret = fresh("sk-rec-")
    redact.register(secret)
    nodeid = f"test_cases/{secret}.yaml::sql[case]"
    record = ItemRecord(nodeid=nodeid, kind="sql", case_kind="sql", case_id="case",
                        file=f"test_cases/{secret}.yaml", line=3, status="failed",
                        failures=[f"server said {secret}"], error=f"Bearer {secret}",
                        evidence={"got": f"http://u:{secret}@h/", "Authorization": "x y"},
                        answers=[{"text": secret}])
    data = record.to_dict()
    assert data["nodeid"] == nodeid and data["file"] == f"test_cases/{secret}.yaml"
    assert data["failures"] == ["server said ***"] and data["error"] == "Bearer ***"
    assert data["evidence"] == {"got": "http://u:***@h/", "Authorization": "***"}
    assert data["answers"] == [{"text": "***"}]
    assert ItemRecord.from_dict(data).to_dict() == data


def test_the_response_cache_stores_replies_scrubbed_under_hashed_keys() -> None:
    secret = fresh("sk-cache-")
    redact.register(secret)
    cache = ResponseCache(None)
    key = ResponseCache.key("m", [{"role": "user", "content": "hi"}], {"seed": 0})
    assert len(key) == 64 and int(key, 16) >= 0  # a SHA-256 digest: no request text in it
    cache.put(key, {"text": f"echo {secret} Authorization: Bearer sk-other-1", "usage": {}})
    assert cache.get(key) == {"text": "echo *** Authorization: Bearer ***", "usage": {}}


TEXT = st.text(alphabet=st.sampled_from("ab Z9 .,:;=/@?&'\"{}\n-_"), max_size=40)


@settings(max_examples=300, deadline=None)
@given(before=TEXT, after=TEXT, form=st.sampled_from([
    "{secret}", "Authorization: Bearer {token}", "authorization={token}",
    "https://user:{token}@host/x", "https://host/v1?api_key={token}", "Basic {basic}",
    "'authorization': 'Basic {basic}'", "x-api-key: {token}"]))
def test_a_planted_credential_never_survives(before: str, after: str, form: str) -> None:
    """Whatever surrounds it, a known secret or a credential in a known shape is masked."""
    secret = "sk-planted-secret-0042"
    redact.register(secret)
    token = "tk0Unknown7Token"  # never registered: only its shape gives it away
    basic = base64.b64encode(b"user:pa55word-x").decode()
    text = f"{before} {form.format(secret=secret, token=token, basic=basic)} {after}"
    out = scrub(text)
    assert secret not in out and token not in out and basic not in out
