"""Secrets out of text before anything is stored (principle 4): OCR text, transcripts, MCP evidence.

It lives in memory/ (not capture/) so that every writer of evidence, capture and the MCP server's
evidence_add alike, redacts with the same patterns; capture/redact.py re-exports it.

Each match becomes a typed marker such as `[REDACTED:aws_key]` and is counted; the spans in the
original text are returned too, so the screen source can black out the same words in a thumbnail.

Two sorts of rule: token shapes a vendor gives its keys (`ghp_…`, `AKIA…`, `shpat_…`), found anywhere,
and values after a label that names a secret (`DB_PASSWORD=…`, `"SecretAccessKey": "…"`, `--password …`,
"my password for the bank is …"). Shapes that ordinary text also takes are checked before they count:
card numbers and IBANs by their checksums, SSNs by the number ranges ever issued, a `Basic` credential by
decoding it, and a labelled value by what it looks like (a call, a type, a placeholder or an ordinary
word after "password is" is code or prose, not a secret).
"""

from __future__ import annotations

import base64
import binascii
import bisect
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from memory.config import REDACTION_KINDS

# A check sees the match and the whole text and gives the span to redact, or None when it is no secret.
Check = Callable[[re.Match[str], str], tuple[int, int] | None]

_PEM = re.compile(
    r"-{3,}\s?BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?\s?-{3,}(?P<body>.*?)"
    r"(?:-{3,}\s?END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?\s?-{3,}|\Z)"
    r"|\bAGE-SECRET-KEY-1[0-9A-Z]{40,}"
    r"|PuTTY-User-Key-File-\d+:.*?(?:Private-MAC:\s*[0-9a-fA-F]+|\Z)", re.S)

# what follows a BEGIN line in a key (blank lines, "\n" escaped in JSON, headers such as Proc-Type, base64);
# "the -----BEGIN RSA PRIVATE KEY----- line" in prose or b"-----BEGIN…-----" in code is a mention
_KEY_BODY = re.compile(r"(?:\s|\\[rn])*(?:[A-Z][\w-]*: [^\n\\]*(?:\n|\\n))*(?:\s|\\[rn])*[A-Za-z0-9+/=]{16}")


def _check_pem(m: re.Match[str], text: str) -> tuple[int, int] | None:
    if m.group("body") is not None and not _KEY_BODY.match(text, m.start("body")):
        return None
    return m.span()


# Vendors' token shapes that need no label. Each alternative is specific enough (prefix, length, alphabet)
# not to turn up in prose or code. Each begins with a letter it is grouped by (see _by_first_letter).
_API_TOKENS = [
    r"shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}",                              # Shopify
    r"do[opr]_v1_[a-f0-9]{64}",                                         # DigitalOcean
    r"pypi-AgE[A-Za-z0-9_-]{30,}",                                      # PyPI
    r"dckr_(?:pat|oat)_[A-Za-z0-9_-]{20,}",                             # Docker Hub
    r"hv[sbr]\.[A-Za-z0-9_-]{24,}",                                     # HashiCorp Vault
    r"s\.(?=[A-Za-z0-9]{0,23}\d)(?=[A-Za-z0-9]{0,23}[A-Z])(?=[A-Za-z0-9]{0,23}[a-z])[A-Za-z0-9]{24}",  # Vault (old)
    r"gsk_[A-Za-z0-9]{20,}",                                            # Groq
    r"xai-[A-Za-z0-9]{50,}", r"pplx-[A-Za-z0-9]{40,}", r"r8_[A-Za-z0-9]{37}",  # xAI, Perplexity, Replicate
    r"lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}", r"pcsk_[A-Za-z0-9_]{40,}", r"sk_[a-f0-9]{48}",  # LangSmith…
    r"key-(?=[a-z0-9]{0,31}\d)[a-z0-9]{32}",                            # Mailgun
    r"SK[0-9a-f]{32}", r"AC[0-9a-f]{32}",                               # Twilio
    r"xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}", r"xsmtpsib-[a-f0-9]{64}-[A-Za-z0-9]{16}",  # Brevo
    r"ATATT3[A-Za-z0-9_=-]{50,}", r"ATCTT3[A-Za-z0-9_=-]{50,}", r"ATBB[A-Za-z0-9]{28,}",  # Atlassian, Bitbucket
    r"lin_(?:api|oauth)_[A-Za-z0-9]{32,}",                              # Linear
    r"secret_(?=[A-Za-z0-9]{0,45}\d)[A-Za-z0-9]{40,46}", r"ntn_[A-Za-z0-9]{40,}",  # Notion
    r"NRAK-[A-Z0-9]{27}", r"NRJS-[a-f0-9]{19}", r"NRII-[A-Za-z0-9_-]{32}",  # New Relic
    r"HRKU-[A-Za-z0-9_-]{20,}",                                         # Heroku
    r"sq0(?:atp|csp|idp)-[A-Za-z0-9_-]{22,}", r"EAA[A-Za-z0-9]{56,}",   # Square, Square/Meta access tokens
    r"access_token\$(?:production|sandbox)\$[a-z0-9]{16}\$[a-f0-9]{32}",  # PayPal / Braintree
    r"AAAA[A-Za-z0-9_-]{7}:APA91b[A-Za-z0-9_-]{20,}",                   # Firebase Cloud Messaging
    r"AAAAAAAAAAAAAAAAAAAAA[A-Za-z0-9%]{30,}",                           # Twitter/X bearer
    r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}",                                  # Postman
    r"dp\.(?:pt|st|ct|sa|scim|audit)\.[A-Za-z0-9]{40,}",                # Doppler
    r"fo1_[A-Za-z0-9_-]{39,}",                                          # Fly.io
    r"sbp_[a-f0-9]{40}", r"sb_secret_[A-Za-z0-9_-]{20,}",               # Supabase
    r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.-]{32,}",                     # PlanetScale
    r"nfp_[A-Za-z0-9]{36}",                                             # Netlify
    r"sk\.eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}",                   # Mapbox
    r"figd_[A-Za-z0-9_-]{40,}",                                         # Figma
    r"sl\.[A-Za-z0-9_.-]{100,}",                                        # Dropbox
    r"pat[A-Za-z0-9]{14}\.[a-f0-9]{64}",                                # Airtable
    r"CFPAT-[A-Za-z0-9_-]{43}",                                         # Contentful
    r"dt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}",                              # Dynatrace
    r"LTAI[A-Za-z0-9]{12,20}",                                          # Alibaba Cloud
    r"bkua_[a-f0-9]{40}", r"pul-[a-f0-9]{40}", r"rubygems_[a-f0-9]{48}", r"oy2[a-z0-9]{43}",  # Buildkite… NuGet
    r"dapi[a-f0-9]{32}(?:-\d)?",                                        # Databricks
    r"glsa_[A-Za-z0-9]{32}_[a-f0-9]{8}", r"glc_[A-Za-z0-9+/]{32,}={0,2}",  # Grafana
    r"sntry[su]_[A-Za-z0-9+/=_-]{40,}",                                 # Sentry
    r"sq[pua]_[a-f0-9]{40}",                                            # SonarQube
    r"tskey-(?:auth|api|client|scim|webhook)-[A-Za-z0-9]{6,}-[A-Za-z0-9]{10,}",  # Tailscale
    r"ops_eyJ[A-Za-z0-9+/=_-]{50,}",                                    # 1Password service account
    r"AKCp[A-Za-z0-9]{60,}", r"cmVmdGtu[A-Za-z0-9]{50,}",               # JFrog
    r"api_org_[A-Za-z0-9]{30,}",                                        # Hugging Face organisation
    r"shippo_(?:live|test)_[a-f0-9]{40}", r"pnu_[A-Za-z0-9]{36}", r"sgp_(?:[a-f0-9]{16}_)?[a-f0-9]{40}",
    r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}",                                # Cloudflare origin CA
    r"00D[A-Za-z0-9]{12,15}![A-Za-z0-9._]{80,}",                        # Salesforce session
    *(c + r"[A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6,7}\.[A-Za-z0-9_-]{27,40}" for c in "MNO"),  # Discord bot
    r"https://discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_-]+",    # Discord webhook
    r"https://[a-z0-9-]+\.webhook\.office\.com/webhookb2/[^\s\"'<>]+",  # Teams webhook
]

# ...and those that begin with a run of any characters, each tried only when its literal is in the text
_API_TOKENS_GATED = [
    (r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,}", "atlasv1"),     # Terraform Cloud
    (r"[a-f0-9]{36}NRAL", "nral"),                                      # New Relic licence key
    (r"[0-9a-f]{32}-us[0-9]{1,2}", "-us"),                              # Mailchimp
    (r"[A-Za-z0-9]{76}AZDO[A-Za-z0-9]{4}", "azdo"),                     # Azure DevOps
    (r"\d{6,12}:AA[A-Za-z0-9_-]{30,40}", ":aa"),                        # Telegram bot
]


def _by_first_letter(branches: list[str]) -> str:
    """One alternation with the branches grouped under their first letter: `s(?:hp…|k_…)|d(?:o…|ckr…)`.
    re tries alternatives one by one, so grouping makes a position that starts no token fail after a
    few comparisons instead of ninety."""
    groups: dict[str, list[str]] = {}
    for b in branches:
        assert b[0].isalnum() and b[1] not in "{*+?", b
        groups.setdefault(b[0], []).append(b[1:])
    return "|".join(f"{c}(?:{'|'.join(rest)})" for c, rest in groups.items())


# Words that name a secret in a label (the last word of `DB_PASSWORD`, `SecretAccessKey`, `X-Api-Key`).
_PASS_WORDS = {"password", "passwd", "passwort", "passphrase", "passcode", "pwd", "kennwort", "wachtwoord",
               "contraseña", "contrasena", "senha", "lösenord", "salasana", "hasło", "heslo", "пароль", "şifre",
               "密码", "密碼", "口令", "パスワード", "비밀번호", "passe"}
_GLUED = ("password", "passwd", "passwort", "passphrase", "passcode")  # PGPASSWORD, dbpassword
_GLUED_KEYS = {"apikey", "secretkey", "accesskey", "privatekey", "masterkey", "appkey", "apisecret", "appsecret",
               "clientsecret", "authtoken", "accesstoken", "refreshtoken", "apitoken", "bearertoken",
               "sessiontoken", "idtoken", "secrettoken", "authkey", "signingkey", "encryptionkey"}
_KEY_QUALIFIERS = {"api", "secret", "private", "access", "client", "auth", "master", "encryption", "signing",
                   "license", "licence", "account", "app", "consumer", "shared", "session", "service", "admin",
                   "webhook", "subscription", "storage", "hmac", "sas", "aes", "jwt", "decryption", "root",
                   "deploy", "write", "read", "management", "developer", "dev", "prod", "live", "test"}
_NOT_SECRET_TOKEN = {"next", "page", "continuation", "pagination", "cancellation", "sync", "max", "min", "num",
                     "total", "input", "output", "prompt", "completion", "completions", "count", "limit",
                     "bos", "eos", "pad", "unk", "sep", "cls", "mask", "start", "end", "special", "new"}
_SUFFIX_OK = {"confirm", "confirmation", "again", "repeat", "value", "plain", "plaintext", "raw", "b64",
              "base64", "enc", "encrypted", "clear", "cleartext"}

# Values after a label that are not secrets: types, literals, and common words of the prose that follows
# "password is" / "Token:" ("the password is incorrect", "Token: expired").
_STOP = set("""
str string int integer bool boolean bytes none null nil true false undefined optional required any object
secretstr secretbytes text varchar char number list dict hidden empty blank na tbd todo unset unknown default
password passwd pwd pass token secret key pin credential credentials auth
the a an this that these those it its my your our their his her mine yours not no yes never always also
only still now then just very too so as at in on of for to from by with without into onto about over under
and or but if when where which who whom what why how than be been being is are was were will would can could
should must may might shall do does did done has have had having same different above below here there
correct incorrect wrong right invalid valid expired expiring missing needed necessary mandatory case sensitive
strong weak short long secure insecure safe unsafe new old current previous first last next stored saved
sent shown set reset changed change updated update entered typed used encrypted hashed protected masked
visible invisible available unavailable configured defined generated rotated revoked disabled enabled
active inactive locked unlocked good bad fine ok okay same please see below following provided given
one two three four five six seven eight nine ten characters chars digits letters random unique simple
important private public personal secret confidential sensitive free easy hard known common weakest
strongest too-short too-long different written here not-set include omit same-origin auto manual off on
enter type use choose create click tap press ask contact provide forgot forget remember request send copy
paste select add edit show hide view bearer basic example sample placeholder dummy redacted
option options flag argument arguments parameter parameters field prompt
""".split())
_CALL = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*\s*[(\[]")
_DOTTED = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+")
_CAMEL_WITH_KEY = re.compile(r"(?:[A-Za-z][a-z]*)?(?:[A-Z][a-z]+)*(?:Password|Passwd|Pwd|Token|Secret|Key|Pass|Pin)[A-Za-z]*")
_MASK = re.compile(r"\W*(?:[*•●·]{3,}|[xX]{3,}|\.{3,}|-{3,})\W*|#(?:[0-9a-fA-F]{3}){1,2}|#[a-z]+")  # ****, #ff00aa
_PLACEHOLDER = re.compile(r"\$\{|\$\(|\{\{|\{[\w.]*\}|%\(?\w*\)?s|<[^>]*>?$|\$[A-Z_][A-Z0-9_]*$|!\w|&\w|…|\.\.\.")
_FILLER = re.compile(r"X{4}|x{4}|…|\.\.\.")  # mir_XXXX, sk-…: an example, not a key
_PATH = re.compile(r"(?:~|\.{1,2}|[A-Za-z]:)?[/\\][\w.~-]*(?:[/\\][\w.~-]*)*"
                   r"|\.?[\w-]+(?:[/\\][\w.-]+)+\.[a-z0-9]{1,5}|\.[\w-]+(?:[/\\][\w.-]+)+")


def _camel_words(label: str) -> list[str]:
    """`SecretAccessKey` / `DB_PASSWORD` / `x-api-key` → lower-case words."""
    if label.isalpha() and (label.islower() or label.isupper()):
        return [label.lower()]
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", label)
    spaced = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1 \2", spaced)
    return [w for w in re.split(r"[\s_.\-:]+", spaced.lower()) if w]


def _tier(words: list[str]) -> str | None:
    """How much the label says a secret follows: 'strong', 'medium', 'entropy' (a key-ish label: only a
    random-looking value counts) or None (not a secret's label)."""
    if not words:
        return None
    if len(words) >= 2 and words[-1] in _SUFFIX_OK and _tier(words[:-1]) == "strong":
        return "strong"
    last, prev = words[-1], (words[-2] if len(words) > 1 else "")
    if last in _PASS_WORDS or last.endswith(_GLUED) or last in _GLUED_KEYS:
        return "strong"
    if last in ("secret", "secrets"):
        return "strong"
    if last in ("token", "tokens"):
        if prev in _NOT_SECRET_TOKEN or last == "tokens" or "public" in words:  # .NET publicKeyToken
            return None
        return "strong"
    if last in ("key", "keys"):
        if prev in ("public", "pub"):
            return None
        return "strong" if prev in _KEY_QUALIFIERS else "entropy"
    if last == "pin" or (last == "code" and prev == "pin") or last == "pincode":
        return "pin"
    if last in ("pass", "pw"):
        return "medium"
    if last in ("credential", "credentials", "auth"):
        return "entropy"
    if last == "id" and prev == "key" and len(words) >= 3 and words[-3] == "private":
        return "entropy"
    if last == "base" and prev == "key" and len(words) >= 3 and words[-3] == "secret":
        return "strong"
    if last == "data" and prev == "key":  # kubeconfig client-key-data: a private key in base64
        return "strong"
    if last == "signature":  # X-Amz-Signature=… of a presigned URL ("Signature: J. Smith" is not random)
        return "entropy"
    return None


def _looks_secret(v: str) -> bool:
    """Has what passwords have and words lack: a digit, a symbol, or a capital inside."""
    return (any(c.isdigit() for c in v) or any(not c.isalnum() and not c.isspace() for c in v)
            or any(c.isupper() for c in v[1:]))


_HEX = re.compile(r"[0-9a-fA-F]{16,}|[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")


def _random_looking(v: str) -> bool:
    """A generated key (hex, a UUID, base64/base62), not words and numbers joined ("user-12345-profile",
    "2024-01-15T10:30:00Z"): long, and it keeps switching between digits, capitals and small letters."""
    core = v.rstrip("=")
    if len(core) < 16 or "://" in v or v.startswith(("/", "./", "~/")) or re.match(r"\d{4}-\d\d-\d\d", core):
        return False
    if _HEX.fullmatch(core):
        return any(c.isdigit() for c in core) and any(c.isalpha() for c in core)
    kinds = ["d" if c.isdigit() else "u" if c.isupper() else "l" for c in core if c.isalnum()]
    if len(set(kinds)) < 2 or "d" not in kinds and len(core) < 24:
        return False
    flips = sum(a != b for a, b in zip(kinds, kinds[1:], strict=False))
    return flips >= (0.3 if "d" in kinds else 0.4) * len(kinds)  # (CamelCaseWords switch about 0.25)


def _is_secret_name(v: str) -> bool:
    """user_password, DB_PASS, newPassword: the name of a variable or setting, not its value."""
    if not re.fullmatch(r"[A-Za-z_-]+", v):
        return False
    parts = re.split(r"[_-]", v.lower())
    return len(parts) > 1 and any(_tier([p]) for p in parts if p) or bool(_CAMEL_WITH_KEY.fullmatch(v))


def _is_code_or_word(v: str, quoted: bool) -> bool:
    """True when the value after a label is code, a placeholder, a mask or a plain word of prose."""
    bare = v.rstrip(".,;:)]}!?")
    if not bare:
        return True
    low = bare.lower()
    if low in _STOP or _MASK.fullmatch(bare) or _PLACEHOLDER.match(v) or _FILLER.search(v) or _PATH.fullmatch(bare):
        return True
    if quoted:
        return bare[0] in ",)]}" or bare[0].isspace() or _is_secret_name(bare)
    if v[0] in "=([{,)]}<>|&":
        return True
    if _CALL.match(v) or _DOTTED.fullmatch(bare) and (bare.count(".") > 1 or not any(c.isdigit() for c in bare)):
        return True
    if re.fullmatch(r"[A-Za-z_]+", bare):
        if _is_secret_name(bare):
            return True
        if bare.islower() and (low.endswith(("ed", "ing", "ly", "able", "ible"))):
            return True  # "Password: required", "token: expired" and other words of prose
    return False


_VALUE = (r"(?:\"(?P<dq>[^\"\n]{1,200})\"|'(?P<sq>[^'\n]{1,200})'|`(?P<bq>[^`\n]{1,200})`"
          r"|(?P<uq>[^\s\"'`]{1,200}))")
# A label ends in a word that names a secret; the value is read in a lookahead so that a label that turns
# out not to be one (`bypass_mode`, `monkey`) does not swallow the text after it.
_LABEL_WORDS = (r"pass(?:word|wd|wort|phrase|code)?|pwd|pw|secret|token|key|pin|credentials?|auth|signature"
                r"|kennwort|wachtwoord|contrase(?:ñ|n)a|senha|lösenord|salasana|hasło|heslo|пароль|şifre"
                r"|密码|密碼|口令|パスワード|비밀번호")
_LABEL = re.compile(
    r"(?i)(?:" + _LABEL_WORDS + r")[A-Za-z0-9_.-]{0,24}?[\"']?[ \t]*(?::=|=>|[:=：])[ \t]*(?=" + _VALUE + ")")
_CODE_AFTER = re.compile(r"[ \t]*=(?!=)|[ \t]+(?:[-+*/%|&^]|==|!=|if|else|or|and)[ \t]")
_CODE_OWNERS = {"self", "this", "cls", "ctx", "obj", "me", "super", "options", "opts", "args", "kwargs", "params",
                "request", "req", "res", "response", "props", "state"}
_NAME_PATH = re.compile(r":[^\s:]*:$")
_IDENT_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-$")
# an unquoted value stops before the next `;Key=` / `&key=` / `,key=` of a connection string or query
_NEXT_PAIR = re.compile(r"[;&,][\w.-]+=")


def _value_span(m: re.Match[str]) -> tuple[int, int, bool]:
    for g in ("dq", "sq", "bq"):
        if m.group(g) is not None:
            return m.start(g), m.end(g), True
    s, e = m.span("uq")
    cut = _NEXT_PAIR.search(m.string, s, e)
    if cut:
        e = cut.start()
    while e - s > 3 and m.string[e - 1] in ",;":  # Password=x; in a connection string
        e -= 1
    return s, e, False


_IDENTIFIER = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*")
_HUMPS = re.compile(r"(?:[A-Z]+[a-z0-9]*){2,}")  # FilterOrBool, PKCS12PrivateKeyTypes (not Hunter2)
_DOC_PARAM = re.compile(r"(?::param|:type|@param|:arg|:keyword|:ivar)[ \t]+(?:[\w.\[\], |]+[ \t]+)?$")
_TYPE_AFTER = re.compile(r"[ \t]*(?:[|,)\]]|=(?!=))")


def _code_shaped(text: str, lstart: int, v: str, e: int, words: list[str]) -> bool:
    """True when `label = value` / `label: value` reads as code, not a setting: an expression
    (`passwd = acct = ''`, `PseudoToken = Whitespace + group(…)`), a type (`password: FilterOrBool = False`,
    `key: PKCS12PrivateKeyTypes | None`), a variable named after the label (`authkey=authkey`,
    `RegEnumKey = win32api.RegEnumKey`), a tuple (`username, password = un, pw`), a snake_case name, a
    docstring's `:param password:`, or one string ("passwd:name")."""
    bare = v.rstrip(".,;:)]}")
    if not _IDENTIFIER.fullmatch(bare):
        return False
    typeish = "." in bare or _HUMPS.fullmatch(bare)
    if not typeish and (any(c.isdigit() for c in bare) or any(c.isupper() for c in bare[1:])):
        return False  # s3cr3tDbPass, Hunter2: what a password looks like, whatever precedes it
    if re.fullmatch(r"[A-Za-z_]+", bare) and _CODE_AFTER.match(text, e):
        return True
    if typeish and _TYPE_AFTER.match(text, e):
        return True
    if (words[-1] in _camel_words(bare) or words[-1] == bare.lower()) and (
            "." in bare or not any(c.isdigit() for c in bare)):
        return True
    if re.fullmatch(r"[a-z]+(?:_[a-z0-9]+)+", bare):
        return True
    line = text[max(0, lstart - 80):lstart]
    if line.endswith(", ") or _DOC_PARAM.search(line):
        return True
    return lstart > 0 and text[lstart - 1] in "\"'" and text[e:e + 1] == text[lstart - 1]


def _check_label(m: re.Match[str], text: str) -> tuple[int, int] | None:
    start = lstart = m.start()
    while lstart > 0 and start - lstart < 64 and text[lstart - 1] in _IDENT_CHARS:
        lstart -= 1
    if lstart > 0 and text[lstart - 1].isalnum() and text[lstart].isascii():
        return None
    if lstart and text[lstart - 1] == ":" and _NAME_PATH.search(text, max(0, lstart - 64), lstart):
        return None  # AWS::IAM::AccessKey, arn:aws:secretsmanager:…:secret:name: a path of names
    label = text[lstart:m.end()].rstrip(" \t:=>\"'：")
    words = _camel_words(label)
    joined = len(words) > 1  # DB_PASS, dbPassword: one identifier, not a word of prose before the label
    if len(words) == 1 and lstart > 1 and text[lstart - 1] == " ":  # "API key: …": the word before counts
        i = lstart - 1
        while i > 0 and lstart - i < 24 and text[i - 1].isascii() and text[i - 1].isalpha():
            i -= 1
        if i < lstart - 1:
            words = [text[i:lstart - 1].lower(), *words]
    tier = _tier(words)
    if tier == "medium" and joined and words[-1] in ("pass", "pw"):
        tier = "strong"  # RABBITMQ_DEFAULT_PASS=guest
    if tier is None:
        return None
    s, e, quoted = _value_span(m)
    v = text[s:e]
    if _is_code_or_word(v, quoted):
        return None
    if not quoted and _code_shaped(text, lstart, v, e, words):
        return None
    if not quoted and words[0] in _CODE_OWNERS and not _looks_secret(v.rstrip(".,;:)]}")):
        return None  # `self.token = nextchar`: an attribute given a variable
    if tier == "strong" and words[-1] in ("token", "key"):
        # tokens and keys are generated: `token = Punctuation`, `token = value_str` are code
        ok = len(v) >= 8 and (any(c.isdigit() for c in v) or _random_looking(v))
    elif tier == "strong":
        ok = len(v) >= 3
    elif tier == "pin":
        ok = bool(re.fullmatch(r"\d{4,8}", v.rstrip(".,;)"))) or (len(v) >= 4 and _looks_secret(v))
    elif tier == "medium":
        # "pass: 120", "maintenance pass: LanceDB's": a bare "pass" takes letters with digits
        ok = len(v) >= 4 and any(c.isdigit() for c in v) and any(c.isalpha() for c in v) and " " not in v
    else:  # a key-ish label ("KEY", "auth", "credentials"): a generated value, or user:password in base64
        ok = _random_looking(v) or _basic_auth(v)
    return (s, e) if ok else None


def _basic_auth(v: str) -> bool:
    """True when v is base64 of `user:password` (what HTTP Basic and a docker config's "auth" carry)."""
    v = v.rstrip(".,;)")
    if len(v) < 8 or len(v) % 4:
        return False
    try:
        raw = base64.b64decode(v, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return False
    user, sep, pw = raw.partition(":")
    return bool(sep and user and pw and raw.isprintable())


def _check_basic(m: re.Match[str], text: str) -> tuple[int, int] | None:
    v = text[m.start(1):m.end(1)]
    ok = _basic_auth(v) or len(v) >= 16 and any(c.isdigit() for c in v)
    return m.span(1) if ok else None


def _check_bearer(m: re.Match[str], text: str) -> tuple[int, int] | None:
    v = text[m.start(1):m.end(1)]
    digit = any(c.isdigit() for c in v)
    mixed = any(c.isupper() for c in v) and any(c.islower() for c in v)
    return m.span(1) if digit or mixed else None


# "my password for the bank is X", "the wifi password is X", "secret is X", "my PIN is 4821"
_FOR = r"(?:[ \t]+(?:for|to|of|on|at|für|pour|para|voor)(?:[ \t]+[\w.@'’-]+){1,4}?)"  # "password for the bank"
_SENTENCE = re.compile(
    r"(?i)\b(?:password|passwd|passphrase|passcode|pin(?: code| number)?|api key|secret(?: key)?"
    r"|access token|kennwort|passwort|mot de passe|contrase(?:ñ|n)a|senha|wachtwoord)"
    r"(?:(?:(?P<for>" + _FOR + r")|(?<=pin code)|(?<=pin number))[ \t]*:"  # (a plain "password: …" is a label)
    r"|" + _FOR + r"?[ \t]+(?:is now|is|was|will be|has been (?:changed |set )?to|changed to|set to|should be)"
    r"(?:[ \t]*:)?)[ \t]+[\"'`“‘]?(?P<v>[^\s\"'`”’]{3,})")


def _check_sentence(m: re.Match[str], text: str) -> tuple[int, int] | None:
    v = text[m.start("v"):m.end("v")]
    if _is_code_or_word(v, False):
        return None
    word = m.group(0).split(None, 1)[0].lower()
    if "mot de passe" in m.group(0).lower():
        word = "password"
    if word == "pin":
        ok = bool(re.fullmatch(r"\d{4,8}[.,;!]?", v)) or _looks_secret(v)
    elif word in ("secret", "api", "access"):  # "the secret to good bread is time": only a key-like value
        ok = m.group("for") is None and _looks_secret(v) and len(v) >= 8
    else:
        ok = True
    return m.span("v") if ok else None


_SSN_SHAPE = re.compile(r"(\d{3})-(\d{2})-(\d{4})(?![\d-])")  # (and no digit or dash before: _check_ssn)
_NATIONAL_VALUE = (r"[ \t]*(?:[:=#]|is|number)?[ \t]*"
                   r"(\d{3}[- ]?\d{2}[- ]?\d{4}|\d{3}[- ]?\d{3}[- ]?\d{3}|[A-Z]{2} ?\d{2} ?\d{2} ?\d{2} ?[A-D]"
                   r"|(?=[A-Z0-9-]*\d{5})[A-Z0-9][A-Z0-9-]{4,14}[A-Z0-9])(?![\w-])")
_NATIONAL_ABBR = re.compile(r"\b(?:SSN|SIN|NINO|TIN|ITIN|SS#|NI number)" + _NATIONAL_VALUE)
_NATIONAL_LABEL = re.compile(
    r"(?i:\bsocial (?:security|insurance)(?: number| no\.?| #)?|\bnational insurance(?: number| no\.?)?"
    r"|\btax(?:payer)? (?:id|identification)(?: number)?)" + _NATIONAL_VALUE)
# (Passport and driving-licence numbers are not redacted: a person keeps them as facts — for a travel form, say —
# and extraction must keep them; they open nothing by themselves, unlike a social security or tax number.)


def _ssn_ok(area: str, group: str, serial: str) -> bool:
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"


def _check_ssn(m: re.Match[str], text: str) -> tuple[int, int] | None:
    if m.start() and text[m.start() - 1] in "0123456789-":
        return None
    return m.span() if _ssn_ok(*m.groups()) else None


_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\b")
_IBAN_LEN = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29, "CH": 21,
    "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FO": 18,
    "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23,
    "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LI": 21, "LT": 20, "LU": 20, "LV": 21,
    "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24, "PL": 28,
    "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "TN": 24,
    "TR": 26, "UA": 29, "VG": 24, "XK": 20,
}


def iban_ok(iban: str) -> bool:
    """True if the IBAN (spaces allowed) has its country's length and passes the mod-97 check."""
    s = iban.replace(" ", "")
    if not 15 <= len(s) <= 34 or _IBAN_LEN.get(s[:2], len(s)) != len(s):
        return False
    digits = "".join(str(int(c, 36)) for c in s[4:] + s[:4])
    return int(digits) % 97 == 1


def _check_iban(m: re.Match[str], text: str) -> tuple[int, int] | None:
    s, e = m.span()
    while e - s >= 15:  # a word of four capitals after the number may have joined it: drop groups until valid
        if iban_ok(text[s:e]):
            return s, e
        cut = text.rfind(" ", s, e)
        if cut < 0:
            break
        e = cut
    return None


# Cookie: / Set-Cookie: headers: each random-looking value is a session credential
_COOKIE = re.compile(r"(?i)\b(?:set-)?cookie[ \t]*:[ \t]*([^\n]{1,2000})")
_COOKIE_PAIR = re.compile(r"([\w.-]{1,64})=(\"?)([^;,\s\"\\]{1,4096})")


def _cookie_spans(m: re.Match[str], text: str) -> list[tuple[int, int]]:
    out = []
    for p in _COOKIE_PAIR.finditer(text, m.start(1), m.end(1)):
        if p.group(1).lower() in ("path", "domain", "expires", "max-age", "samesite"):
            continue
        if _random_looking(p.group(3)) or _tier(_camel_words(p.group(1))) in ("strong", "medium"):
            out.append(p.span(3))
    return out


# a base64-encoded PEM private key (kubeconfig client-key-data, a Kubernetes Secret, a CI variable)
_PEM_B64 = re.compile(r"\bLS0tLS1CRUdJTi[A-Za-z0-9+/]{20,}={0,2}")


def _check_pem_b64(m: re.Match[str], text: str) -> tuple[int, int] | None:
    head = m.group()[:64]
    try:
        return m.span() if b"PRIVATE KEY" in base64.b64decode(head[: len(head) // 4 * 4]) else None
    except (binascii.Error, ValueError):
        return None


# a wallet's recovery phrase (12-24 words), a Bitcoin WIF private key, a BIP32 extended private key
_MNEMONIC = re.compile(
    r"(?i)\b(?:(?:secret |wallet )?(?:seed|recovery|backup) phrase|mnemonic(?: phrase)?|seed words|wallet seed)"
    r"[ \t]*(?:[:=]|is)?[ \t]*[\"']?((?:[a-z]{3,8}[ \t]+){11,23}[a-z]{3,8})\b")
_WALLET_KEY = re.compile(
    r"\b(?:[5KL][1-9A-HJ-NP-Za-km-z]{50,51}|[xyzt]prv[1-9A-HJ-NP-Za-km-z]{100,112})(?![A-Za-z0-9])")
# one-time and recovery codes said or labelled: "your verification code is 482913", "recovery codes: …"
_CODES = re.compile(
    r"(?i)\b(?:otp|one[- ]time (?:pass)?code|one[- ]time password|verification code|(?:2fa|mfa|auth|login|sms)"
    r" code|recovery codes?|backup codes?)[ \t]*(?:[:=]|is|was)?[ \t]*[\"']?(\d{4,10}|[a-z0-9]{4,6}-[a-z0-9]{4,6}"
    r"|(?=[a-z0-9]*\d)[a-z0-9]{8,16})(?![\w-])")


# (not after a digit, a dash or a point (the decimals of 0.6594761494500487): _check_card)
_CARD = re.compile(r"(?:\d[ -]?){12,18}\d(?!\d|[.,]\d)")
_CVV = re.compile(
    r"(?i)\b(?:cvv2?|cvc2?|cid|csc|cvn|security code|card verification (?:value|code))\s*(?:[:=#]|is)?\s*"
    r"(\d{3,4})(?!\d)")


_ACCOUNT = re.compile(
    r"(?i)\b(?:(?:bank )?account (?:number|no\.?|#)|acct\.?(?: no\.?| #| number)?|routing (?:number|no\.?|#)"
    r"|sort code|bsb|aba(?: number)?)[ \t]*(?:[:=#]|is)?[ \t]*(\d[\d -]{4,22}\d)(?![\d-])")


def _check_card(m: re.Match[str], text: str) -> tuple[int, int] | None:
    s, e = m.span()
    if s and text[s - 1] in "0123456789.-*/^" or text[e:e + 1] in ("*", "/", "^"):
        return None  # 476837158203125*p*q: a factor in arithmetic
    groups = [len(g) for g in re.split(r"[ -]", m.group())]
    if len(groups) > 1 and not (groups[:-1] == [4] * (len(groups) - 1) and len(groups) >= 3
                                or groups in ([4, 6, 5], [4, 6, 4])):
        return None  # cards are written in fours (Amex/Diners 4-6-5, 4-6-4), not as a DOI or a phone number
    digits = re.sub(r"\D", "", m.group())
    # issuers' ranges: Visa 4, Mastercard 51-55 and 2221-2720, Amex/Diners/JCB 3, Discover/UnionPay/Maestro 5-6
    iin = digits[0] in "3456" or "2221" <= digits[:4] <= "2720"
    ok = 13 <= len(digits) <= 19 and len(set(digits)) > 1 and iin and luhn_ok(digits)
    return m.span() if ok else None


_URL_CRED = re.compile(r"\b[a-z][a-z0-9+.-]{1,20}://[^\s:/@]{0,64}:([^\s@/]{3,})@")


def _check_url(m: re.Match[str], text: str) -> tuple[int, int] | None:
    v = m.group(1)  # "<password>", "${DB_PASS}", "pass" in an example URL is not one
    if v.lower() in _STOP or _PLACEHOLDER.match(v) or _MASK.fullmatch(v) or _FILLER.search(v):
        return None
    return m.span(1)


_AUTHZ = re.compile(
    r"(?i)\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?:(?:token|ssws|apikey|api-key|key|oauth|bot)\s+)?"
    r"(?!bearer\b|basic\b|digest\b)([A-Za-z0-9._~+/=:-]{12,})")


def _check_authz(m: re.Match[str], text: str) -> tuple[int, int] | None:
    return m.span(1) if _random_looking(text[m.start(1):m.end(1)]) else None


_BEARER = re.compile(r"(?i)\bbearer\s+([A-Za-z0-9._~+/-]{16,}=*)")
_BASIC = re.compile(r"(?i)\bbasic\s+([A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])")

# command lines: --password X, --db-password=X, mysql -pX, sshpass -p X (curl -u, openssl and .netrc below)
_QUOTED_OR_WORD = r"(?:\"([^\"\n]+)\"|'([^'\n]+)'|([^\s\"']+))"
_FLAG = re.compile(
    r"(?i)(?<![\w-])--?((?:[a-z0-9]+-){0,4})(?:password|passwd|pass|pwd|passphrase|token|secret|api-?key"
    r"|auth-token|access-token|client-secret)(?:=|\s+)(?!-)" + _QUOTED_OR_WORD)
_MYSQL = re.compile(
    r"\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlsh|mariadb|mariadb-dump)\b[^\n|;&]{0,200}?\s-p"
    r"(?!-)" + _QUOTED_OR_WORD)
_SSHPASS = re.compile(r"\bsshpass\s+(?:-[a-zA-Z]\s+\S+\s+)*?-p\s*" + _QUOTED_OR_WORD)
_LOGIN_P = re.compile(r"\b(?:docker|podman|nerdctl|buildah|skopeo)\s+login\b[^\n|;&]{0,200}?\s-p\s+" + _QUOTED_OR_WORD)
_CURL = re.compile(r"\bcurl\b[^\n|;&]{0,200}?\s(?:-u|--user)\s*[\"']?[^\s:\"']*:([^\s\"']+)")
_SMB = re.compile(r"\bsmbclient\b[^\n|;&]{0,200}?\s(?:-U|--user)[ =]?[^\s%]+%([^\s\"']+)")
_OPENSSL = re.compile(r"\s-pass(?:in|out)?\s+pass:(\S+)")
_NETRC = re.compile(r"\blogin[ \t]+\S+\s+password[ \t]+(\S+)")
# <add key="DbPassword" value="…"/> (.NET appSettings), <param name="token" value="…">
_XML_ATTR = re.compile(r"\b(?:key|name)=\"([A-Za-z][\w.:-]{0,60})\"[ \t]+value=\"([^\"\n]{3,200})\"")


def _check_xml_attr(m: re.Match[str], text: str) -> tuple[int, int] | None:
    tier = _tier(_camel_words(m.group(1)))
    v = m.group(2)
    if tier is None or _is_code_or_word(v, True) or tier != "strong" and not _random_looking(v):
        return None
    return m.span(2)


# zip -P pass, 7z a -pSECRET
_ARCHIVE = re.compile(r"\b(?:zip\b[^\n|;&]{0,200}?[ \t]-P[ \t]+|7za?\b[^\n|;&]{0,200}?[ \t]-p)([^\s\"'-]\S*)")
# <password>…</password>
_XML = re.compile(r"<(?:[\w-]+:)?([A-Za-z][\w.-]{0,40})>([^<\s][^<\n]{2,200})</(?:[\w-]+:)?\1>")


def _check_xml(m: re.Match[str], text: str) -> tuple[int, int] | None:
    tier = _tier(_camel_words(m.group(1)))
    v = m.group(2)
    if tier is None or _is_code_or_word(v, True) or tier != "strong" and not _random_looking(v):
        return None
    return m.span(2)


def _quoted_or_word(m: re.Match[str], first: int) -> tuple[int, bool]:
    """The group of _QUOTED_OR_WORD that matched (its number from `first`) and whether it was quoted."""
    g = next(i for i in (first, first + 1, first + 2) if m.group(i) is not None)
    return g, g != first + 2


def _check_flag(m: re.Match[str], text: str) -> tuple[int, int] | None:
    g, quoted = _quoted_or_word(m, 2)
    v = text[m.start(g):m.end(g)]  # (the rule runs on the lower-cased text)
    if any(w in _NOT_SECRET_TOKEN for w in m.group(1).split("-")) or _is_code_or_word(v, quoted):
        return None
    return m.span(g) if len(v.rstrip(".,;:)]}")) >= 3 else None


def _variable(v: str) -> bool:
    """$PASS, %PASS%, {{ pass }}, <password>, …: a command line's stand-in, not a password."""
    return v.startswith(("$", "%", "{", "<", "`")) or bool(_FILLER.search(v)) or bool(_MASK.fullmatch(v))


def _check_command(m: re.Match[str], text: str) -> tuple[int, int] | None:
    g, _ = _quoted_or_word(m, 1)
    return None if _variable(m.group(g)) else m.span(g)


def _span1(m: re.Match[str], text: str) -> tuple[int, int] | None:
    return m.span(1)


def _check_arg(m: re.Match[str], text: str) -> tuple[int, int] | None:
    """A password given on a command line, unless it stands in for one."""
    return None if _variable(m.group(1)) else m.span(1)


_GLAB = ("glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "glimt-", "glsoat-", "glffct-", "glagent-", "gloas-")

# (kind, pattern, group redacted, gate). Order matters: whole blocks and specific token shapes win over the
# generic label rules. The gate is literals of which the text must hold one for the pattern to be tried at
# all (a literal with no capital is looked for in the lower-cased text): most texts hold none, and `in` is
# far cheaper than a scan with the pattern.
_RULES: list[tuple[str, re.Pattern, int, tuple[str, ...]]] = [
    ("private_key", _PEM, 0, ("PRIVATE KEY", "AGE-SECRET-KEY-", "PuTTY-User-Key-File")),
    ("private_key", _PEM_B64, 0, ("LS0tLS1CRUdJTi",)),
    ("private_key", _MNEMONIC, 1, ("phrase", "mnemonic", "seed")),
    ("private_key", _WALLET_KEY, 0, ()),
    ("aws_key", re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA)[A-Z0-9]{16}(?![A-Z0-9])"), 0,
     ("AKIA", "ASIA", "AGPA", "AIDA", "AROA", "AIPA", "ANPA", "ANVA")),
    ("aws_secret", re.compile(
        r"(?i)(?:aws[\w ]{0,20}?(?:secret|sk)|secret_?access_?key)[\w ]{0,20}?[\"']?\s*(?:[:=]|\bis\b)?\s*[\"']?"
        r"([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"), 1, ("aws", "access")),
    ("aws_secret", re.compile(
        r"(?i)(?:aws_?session_?token|\bsession_?token|x-amz-security-token)[\"']?\s*[:=]\s*[\"']?"
        r"([A-Za-z0-9/+=]{16,})"), 1, ("session", "x-amz")),
    ("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})"), 0,
     ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    ("slack_token", re.compile(
        r"\b(?:xox(?:[abposr]|e\.xox[abposr]|e)-[A-Za-z0-9-]{10,}|xapp-\d-[A-Za-z0-9-]{10,}"
        r"|https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/]+)"), 0,
     ("xox", "xapp-", "hooks.slack.com")),
    ("stripe_key", re.compile(r"\b(?:(?:sk|rk|pk|whsec)_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{32,})"), 0,
     ("_live_", "_test_", "whsec_")),
    ("openai_key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-|ant-)?[A-Za-z0-9_-]{20,}"), 0, ("sk-",)),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), 0, ("eyJ",)),
    ("google_api_key", re.compile(
        r"\b(?:AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])|GOCSPX-[A-Za-z0-9_-]{20,}|ya29\.[A-Za-z0-9_-]{20,}"
        r"|1//0[A-Za-z0-9_-]{40,})"), 0, ("AIza", "GOCSPX-", "ya29.", "1//0")),
    ("gitlab_token", re.compile(r"\bgl(?:pat|dt|rt|ptt|cbt|imt|soat|ffct|agent|oas)-[A-Za-z0-9_-]{20,}"), 0, _GLAB),
    ("npm_token", re.compile(r"\bnpm_[A-Za-z0-9]{36}(?![A-Za-z0-9])"), 0, ("npm_",)),
    ("npm_token", re.compile(r"\b_auth(?:Token)?\s*=\s*[\"']?([^\s\"']{8,})"), 1, ("_auth",)),  # .npmrc
    ("huggingface_token", re.compile(r"\bhf_[A-Za-z0-9]{30,}(?![A-Za-z0-9])"), 0, ("hf_",)),
    ("sendgrid_key", re.compile(r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"), 0, ("SG.",)),
    ("azure_key", re.compile(
        r"(?i)\b(?:accountkey|sharedaccesskey|sharedaccesssignature|sig)=([A-Za-z0-9+/%]{20,}=*)"), 1,
     ("accountkey=", "sharedaccesskey=", "sharedaccesssignature=", "sig=")),
    # an Entra ID (Azure AD) client secret: three characters, a digit, "Q~", 31-34 more
    ("azure_key", re.compile(r"(?<![\w~.-])[A-Za-z0-9_~.-]{3}\dQ~[A-Za-z0-9_~.-]{31,34}(?![\w~.-])"), 0, ("Q~",)),
    ("api_token", re.compile(r"\b(?:" + _by_first_letter(_API_TOKENS) + r")(?![A-Za-z0-9_-])"), 0, ()),
    *(("api_token", re.compile(r"\b" + p + r"(?![A-Za-z0-9_-])"), 0, (lit,)) for p, lit in _API_TOKENS_GATED),
    ("bank_account", _IBAN, 0, ()),
    ("bank_account", _ACCOUNT, 1, ("account", "acct", "routing", "sort code", "bsb", "aba")),
    ("national_id", _SSN_SHAPE, 0, ()),
    ("national_id", _NATIONAL_ABBR, 1, ("SSN", "SIN", "NINO", "TIN", "SS#", "NI number")),
    ("national_id", _NATIONAL_LABEL, 1, ("social", "national insurance", "tax")),
    # user:password@ in any URL (a database DSN, a git remote, redis://:pass@): the password goes.
    ("url_credentials", _URL_CRED, 1, ("://",)),
    ("bearer_token", _BEARER, 1, ("bearer",)),
    ("bearer_token", _BASIC, 1, ("basic",)),
    ("bearer_token", _AUTHZ, 1, ("authorization",)),
    ("bearer_token", re.compile(r"\bSSWS\s+(00[A-Za-z0-9_-]{40})"), 1, ("SSWS",)),  # Okta
    ("bearer_token", _COOKIE, 1, ("cookie",)),
    ("card_number", _CARD, 0, ()),
    ("card_number", _CVV, 1, ("cvv", "cvc", "cid", "csc", "cvn", "security code", "card verification")),
    ("password", _FLAG, 0, ()),
    ("password", _MYSQL, 0, ("mysql", "mariadb")),
    ("password", _SSHPASS, 0, ("sshpass",)),
    ("password", _LOGIN_P, 0, ("login",)),
    ("password", _SMB, 1, ("smbclient",)),
    ("password", _XML, 0, ("</",)),
    ("password", _XML_ATTR, 0, ("value=",)),
    ("password", _ARCHIVE, 1, ("zip", "7z")),
    ("password", _CURL, 1, ("curl",)),
    ("password", _OPENSSL, 1, ("pass:",)),
    ("password", _NETRC, 1, ("login",)),  # ~/.netrc
    ("password", re.compile(r"\bPIN\s*(?:[:=#-]\s*|is\s+)?(\d{4,8})(?![\d-])"), 1, ("PIN",)),
    ("password", _CODES, 1, ("otp", "one", "code")),
    ("password", _LABEL, 0, ()),
    ("password", _SENTENCE, 0, ()),
]
_PATTERNS: list[tuple[str, re.Pattern, int]] = [(k, p, g) for k, p, g, _ in _RULES]
_GATES: dict[re.Pattern, tuple[str, ...]] = {p: gate for _, p, _, gate in _RULES if gate}
assert {k for k, _, _ in _PATTERNS} == set(REDACTION_KINDS), "config.REDACTION_KINDS and _PATTERNS disagree"

_CHECKS: dict[re.Pattern, Check] = {
    _PEM: _check_pem, _AUTHZ: _check_authz, _URL_CRED: _check_url,
    _PEM_B64: _check_pem_b64, _ACCOUNT: _span1,
    _LABEL: _check_label, _SENTENCE: _check_sentence, _SSN_SHAPE: _check_ssn, _NATIONAL_ABBR: _span1,
    _NATIONAL_LABEL: _span1, _IBAN: _check_iban, _CARD: _check_card, _BEARER: _check_bearer, _BASIC: _check_basic,
    _FLAG: _check_flag, _MYSQL: _check_command, _SSHPASS: _check_command, _LOGIN_P: _check_command,
    _XML: _check_xml, _XML_ATTR: _check_xml_attr, _ARCHIVE: _check_arg, _CURL: _check_arg, _SMB: _check_arg, _OPENSSL: _check_arg, _NETRC: _check_arg,
}


def _literals_lower(pattern: str) -> bool:
    """True if, escapes and character classes aside, the pattern's letters are all lower case."""
    body = re.sub(r"\\.|\[(?:\\.|[^\]])*\]|\(\?P<\w+>", "", pattern)
    return body == body.lower()


# How each rule is run, for speed: re scans fastest for a pattern that begins with a literal, and several
# times slower under (?i). So a case-blind rule (written with lower-case literals) runs as a case-sensitive
# twin over the lower-cased text, its checks reading values from the original text by position; and a
# leading \b is taken off and tested after the match instead. (pattern run, on lower-cased text, \b first)
def _runner(p: re.Pattern) -> tuple[re.Pattern, bool, bool]:
    src, lower = p.pattern.removeprefix("(?i)"), p.pattern.startswith("(?i)")
    word = src.startswith(r"\b")
    src = src.removeprefix(r"\b")
    assert not lower or _literals_lower(src), f"a (?i) rule must be written in lower case: {src[:40]}"
    return (re.compile(src, p.flags & ~re.IGNORECASE) if lower or word else p), lower, word


_RUN: dict[re.Pattern, tuple[re.Pattern, bool, bool]] = {p: _runner(p) for _, p, _ in _PATTERNS}


@dataclass
class Redacted:
    """Redacted text, how many of each kind were removed, and where they were in the original."""

    text: str
    counts: dict[str, int] = field(default_factory=dict)
    spans: list[tuple[int, int, str]] = field(default_factory=list)  # (start, end, kind) in the input

    @property
    def total(self) -> int:
        """Number of redactions of every kind together."""
        return sum(self.counts.values())


def luhn_ok(digits: str) -> bool:
    """True if the digit string passes the Luhn checksum card numbers carry."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


class Redactor:
    """Finds secrets of the enabled kinds and replaces them with typed markers."""

    def __init__(self, kinds: Iterable[str] = REDACTION_KINDS, enabled: bool = True) -> None:
        wanted = set(kinds) if enabled else set()
        self.patterns = [(k, p, g) for k, p, g in _PATTERNS if k in wanted]

    def spans(self, text: str) -> list[tuple[int, int, str]]:
        """Non-overlapping (start, end, kind) spans of secrets; earlier kinds win overlaps."""
        taken: list[tuple[int, int, str]] = []  # kept sorted by start; they never overlap
        low = text.lower()
        if len(low) != len(text):  # a few characters (İ) lower-case to two: keep those as they are
            low = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
        for kind, pat, group in self.patterns:
            gate = _GATES.get(pat)
            if gate and not any(lit in (low if lit.islower() else text) for lit in gate):
                continue
            check = _CHECKS.get(pat)
            run, on_lower, word_start = _RUN.get(pat, (pat, False, False))
            for m in run.finditer(low if on_lower else text):
                at = m.start()
                if word_start and at and (text[at - 1].isalnum() or text[at - 1] == "_"):
                    continue
                i = bisect.bisect_right(taken, (at, len(text)))
                if i and taken[i - 1][1] > at:
                    continue  # inside what is already redacted (a label within a redacted value)
                if pat is _COOKIE:
                    found = _cookie_spans(m, text)
                else:
                    span = check(m, text) if check else m.span(group)
                    found = [span] if span is not None else []
                for start, end in found:
                    if start < 0 or start == end:
                        continue
                    i = bisect.bisect_left(taken, (start,))
                    if i > 0 and taken[i - 1][1] > start or i < len(taken) and taken[i][0] < end:
                        continue
                    taken.insert(i, (start, end, kind))
        return taken

    def redact(self, text: str) -> Redacted:
        """The text with every secret replaced by `[REDACTED:kind]`, plus counts and original spans."""
        spans = self.spans(text)
        if not spans:
            return Redacted(text)
        out, pos = [], 0
        for start, end, kind in spans:
            out.append(text[pos:start])
            out.append(f"[REDACTED:{kind}]")
            pos = end
        out.append(text[pos:])
        return Redacted("".join(out), dict(Counter(k for _, _, k in spans)), spans)
