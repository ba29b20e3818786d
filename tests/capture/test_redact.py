"""Redaction of secrets from captured text: typed markers, counts, and no false card numbers."""

from __future__ import annotations

import pytest

from capture.redact import Redactor, luhn_ok

CASES = [
    ("aws_key", "key AKIAIOSFODNN7EXAMPLE here", "AKIAIOSFODNN7EXAMPLE"),
    ("aws_secret", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("github_token", "token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
    ("github_token", "github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "github_pat_11ABCDEFG0123456789_abcdefghijklmnop"),
    ("slack_token", "bot xoxb-1234567890-abcdefghijkl done", "xoxb-1234567890-abcdefghijkl"),
    ("stripe_key", "use sk_live_4eC39HqLyjWDarjtT1zdp7dc", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
    ("openai_key", "OPENAI=sk-proj-abcdefghijklmnopqrstuvwxyz123456", "sk-proj-abcdefghijklmnopqrstuvwxyz123456"),
    ("jwt", "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
     "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"),
    ("private_key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\n-----END RSA PRIVATE KEY-----", "MIIEowIBAAKCAQEA7"),
    ("card_number", "card 4111 1111 1111 1111 exp 12/29", "4111 1111 1111 1111"),
    ("card_number", "visa 4012-8888-8888-1881", "4012-8888-8888-1881"),
    ("password", "Password: hunter2!xyz", "hunter2!xyz"),
    ("password", "db passwd=Sup3rS3cret", "Sup3rS3cret"),
    ("password", 'config {"client_secret": "c1i3nt-s3cr3t-v4lue"}', "c1i3nt-s3cr3t-v4lue"),
    ("password", "and the wifi password is tulip-88-orbit", "tulip-88-orbit"),
    ("google_api_key", "maps key AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q in the page",
     "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"),
    ("gitlab_token", "export GL=glpat-xY7zAb3Cd4Ef5Gh6Ij7K", "glpat-xY7zAb3Cd4Ef5Gh6Ij7K"),
    ("npm_token", "//registry.npmjs.org/:_authToken npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", "npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"),
    ("huggingface_token", "HF hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"),
    ("sendgrid_key", "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 sent",
     "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"),
    ("azure_key", "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=Zm9vYmFyYmF6cXV4cXV1eDEyMzQ1Njc4OTA=;",
     "Zm9vYmFyYmF6cXV4cXV1eDEyMzQ1Njc4OTA="),
    ("url_credentials", "DATABASE_URL=postgres://app:Tr0ub4dor3@db.internal:5432/prod", "Tr0ub4dor3"),
    ("bearer_token", "curl -H 'Authorization: Bearer 8f14e45fceea167a5a36dedd4bea2543' api",
     "8f14e45fceea167a5a36dedd4bea2543"),
]


@pytest.mark.parametrize("kind,text,secret", CASES)
def test_each_kind_is_replaced_by_a_typed_marker(kind, text, secret):
    r = Redactor().redact(text)
    assert secret not in r.text
    assert f"[REDACTED:{kind}]" in r.text
    assert r.counts.get(kind) == 1 and r.total >= 1


def test_non_luhn_numbers_and_plain_text_are_left_alone():
    text = "order 4111 1111 1111 1112 shipped; call 0800 123 4567; build 20240101123456"
    r = Redactor().redact(text)
    assert r.text == text and r.total == 0
    assert luhn_ok("4111111111111111") and not luhn_ok("4111111111111112")


def test_counts_spans_and_switches():
    text = "a AKIAIOSFODNN7EXAMPLE b AKIAIOSFODNN7EXAMPLF c 4111111111111111"
    r = Redactor().redact(text)
    assert r.counts == {"aws_key": 2, "card_number": 1} and r.total == 3
    assert [text[s:e] for s, e, _ in r.spans] == ["AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLF", "4111111111111111"]
    only_cards = Redactor(kinds=["card_number"]).redact(text)
    assert "AKIAIOSFODNN7EXAMPLE" in only_cards.text and only_cards.total == 1
    assert Redactor(enabled=False).redact(text).text == text


def test_label_after_a_redacted_token_is_not_double_counted():
    r = Redactor().redact("token: ghp_abcdefghijklmnopqrstuvwxyz0123456789")
    assert r.counts == {"github_token": 1}
