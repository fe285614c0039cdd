"""A corpus of secret shapes, written for memlog's redaction tests, and of ordinary text that is not secret.

Every value is fake: the random parts are drawn from a hash of the entry's name, so the values look like
the real thing (prefix, alphabet, length) without being anyone's key, and no literal key sits in the source.
Prefixes and lengths follow the providers' published formats.

Two kinds of secrets:
- `SHAPED`: recognisable by their value alone (a provider prefix, a PEM block, a JWT, a card number, an
  email address, a long random token); they must be redacted wherever they appear, even in free text under
  an innocent key.
- `PLAIN`: a password or code that looks like anything else; redacted where its context says it is one
  (a sensitive key or variable name, a URL's user info, a header, Basic auth), in each such carrier.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass

UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
LOWER = "abcdefghijklmnopqrstuvwxyz"
DIGITS = "0123456789"
HEX = "0123456789abcdef"
ALNUM = UPPER + LOWER + DIGITS
URLSAFE = ALNUM + "-_"
B64 = ALNUM + "+/"


def fake(name: str, alphabet: str, length: int) -> str:
    """`length` characters of `alphabet`, fixed by `name`: looks random, is the same on every run."""
    out: list[str] = []
    counter = 0
    while len(out) < length:
        digest = hashlib.sha256(f"{name}:{counter}".encode()).digest()
        out.extend(alphabet[byte % len(alphabet)] for byte in digest)
        counter += 1
    return "".join(out[:length])


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@dataclass(frozen=True)
class Secret:
    family: str
    name: str
    value: str


def _pem(kind: str, name: str, lines: int = 6) -> str:
    body = "\n".join(fake(f"{name}{i}", B64, 64) for i in range(lines))
    return f"-----BEGIN {kind}-----\n{body}\n{fake(name, B64, 24)}==\n-----END {kind}-----"


def _jwt(name: str, header: str, payload: str, signature_bytes: int) -> str:
    encode = lambda text: base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")  # noqa: E731
    return f"{encode(header)}.{encode(payload)}.{fake(name, URLSAFE, signature_bytes)}"


def _luhn_ok(number: str) -> bool:
    digits = [int(c) for c in number if c.isdigit()][::-1]
    return sum(d if i % 2 == 0 else (d * 2 - 9 if d > 4 else d * 2) for i, d in enumerate(digits)) % 10 == 0


SHAPED: tuple[Secret, ...] = (
    # provider keys, by their published prefixes
    Secret("openai", "openai-legacy", "sk-" + fake("openai-legacy", ALNUM, 48)),
    Secret("openai", "openai-project", "sk-proj-" + fake("openai-project", URLSAFE, 120)),
    Secret("openai", "openai-service-account", "sk-svcacct-" + fake("openai-svc", URLSAFE, 90)),
    Secret("openai", "openai-admin", "sk-admin-" + fake("openai-admin", URLSAFE, 80)),
    Secret("anthropic", "anthropic-api", "sk-ant-api03-" + fake("anthropic", URLSAFE, 93) + "AA"),
    Secret("anthropic", "anthropic-admin", "sk-ant-admin01-" + fake("anthropic-admin", URLSAFE, 93) + "AA"),
    Secret("stripe", "stripe-secret-live", "sk_live_" + fake("stripe-sl", ALNUM, 99)),
    Secret("stripe", "stripe-secret-test", "sk_test_" + fake("stripe-st", ALNUM, 24)),
    Secret("stripe", "stripe-restricted-live", "rk_live_" + fake("stripe-rl", ALNUM, 99)),
    Secret("stripe", "stripe-restricted-test", "rk_test_" + fake("stripe-rt", ALNUM, 24)),
    Secret("stripe", "stripe-webhook", "whsec_" + fake("stripe-wh", ALNUM, 32)),
    Secret("github", "github-pat-classic", "ghp_" + fake("ghp", ALNUM, 36)),
    Secret("github", "github-oauth", "gho_" + fake("gho", ALNUM, 36)),
    Secret("github", "github-user-to-server", "ghu_" + fake("ghu", ALNUM, 36)),
    Secret("github", "github-server-to-server", "ghs_" + fake("ghs", ALNUM, 36)),
    Secret("github", "github-refresh", "ghr_" + fake("ghr", ALNUM, 76)),
    Secret("github", "github-fine-grained", "github_pat_" + fake("ghfg1", ALNUM, 22) + "_" + fake("ghfg2", ALNUM, 59)),
    Secret("gitlab", "gitlab-pat", "glpat-" + fake("glpat", URLSAFE, 20)),
    Secret("gitlab", "gitlab-deploy", "gldt-" + fake("gldt", URLSAFE, 20)),
    Secret("gitlab", "gitlab-runner", "glrt-" + fake("glrt", URLSAFE, 20)),
    Secret("gitlab", "gitlab-trigger", "glptt-" + fake("glptt", HEX, 40)),
    Secret(
        "slack", "slack-bot", f"xoxb-{fake('xoxb1', DIGITS, 12)}-{fake('xoxb2', DIGITS, 13)}-{fake('xoxb', ALNUM, 24)}"
    ),
    Secret(
        "slack", "slack-user", f"xoxp-{fake('xoxp1', DIGITS, 12)}-{fake('xoxp2', DIGITS, 12)}-{fake('xoxp', HEX, 32)}"
    ),
    Secret(
        "slack",
        "slack-app-level",
        f"xapp-1-A{fake('xapp1', UPPER, 10)}-{fake('xapp2', DIGITS, 13)}-{fake('xapp', HEX, 64)}",
    ),
    Secret("slack", "slack-refresh", f"xoxe-1-{fake('xoxe', ALNUM, 140)}"),
    Secret("slack", "slack-rotating", f"xoxe.xoxp-1-{fake('xoxep', ALNUM, 150)}"),
    Secret("slack", "slack-legacy-workspace", f"xoxa-2-{fake('xoxa', ALNUM, 60)}"),
    Secret(
        "slack",
        "slack-webhook",
        f"https://hooks.slack.com/services/T{fake('swh1', UPPER + DIGITS, 8)}/B{fake('swh2', UPPER + DIGITS, 10)}/"
        + fake("swh3", ALNUM, 24),
    ),
    Secret("google", "google-api-key", "AIza" + fake("aiza", URLSAFE, 35)),
    Secret("google", "google-oauth-access", "ya29." + fake("ya29", URLSAFE, 150)),
    Secret("google", "google-client-secret", "GOCSPX-" + fake("gocspx", URLSAFE, 28)),
    Secret("google", "google-refresh", "1//0" + fake("g-refresh", URLSAFE, 99)),
    Secret("aws", "aws-access-key-id", "AKIA" + fake("akia", UPPER + DIGITS, 16)),
    Secret("aws", "aws-temporary-key-id", "ASIA" + fake("asia", UPPER + DIGITS, 16)),
    Secret("aws", "aws-secret-access-key", fake("aws-secret", B64, 40)),
    Secret("aws", "aws-session-token", "IQoJb3JpZ2luX2Vj" + fake("aws-session", B64, 300)),
    Secret("twilio", "twilio-api-key", "SK" + fake("twilio", HEX, 32)),
    Secret("sendgrid", "sendgrid", f"SG.{fake('sg1', URLSAFE, 22)}.{fake('sg2', URLSAFE, 43)}"),
    Secret("mailgun", "mailgun", "key-" + fake("mailgun", HEX, 32)),
    Secret("mailchimp", "mailchimp", fake("mailchimp", HEX, 32) + "-us21"),
    Secret("npm", "npm-token", "npm_" + fake("npm", ALNUM, 36)),
    Secret("pypi", "pypi-token", "pypi-AgEIcHlwaS5vcmc" + fake("pypi", URLSAFE, 160)),
    Secret("huggingface", "huggingface", "hf_" + fake("hf", UPPER + LOWER, 34)),
    Secret("huggingface", "huggingface-org", "api_org_" + fake("hforg", UPPER + LOWER, 34)),
    Secret(
        "discord",
        "discord-bot",
        f"M{fake('discord1', ALNUM, 25)}.{fake('discord2', URLSAFE, 6)}.{fake('discord3', URLSAFE, 38)}",
    ),
    Secret("telegram", "telegram-bot", f"{fake('tg1', DIGITS, 10)}:AA{fake('tg2', URLSAFE, 33)}"),
    Secret("shopify", "shopify-access", "shpat_" + fake("shpat", HEX, 32)),
    Secret("shopify", "shopify-shared-secret", "shpss_" + fake("shpss", HEX, 32)),
    Secret("digitalocean", "digitalocean-pat", "dop_v1_" + fake("dop", HEX, 64)),
    Secret("digitalocean", "digitalocean-oauth", "doo_v1_" + fake("doo", HEX, 64)),
    Secret("vault", "vault-service", "hvs." + fake("hvs", URLSAFE, 90)),
    Secret("vault", "vault-batch", "hvb." + fake("hvb", URLSAFE, 138)),
    Secret("databricks", "databricks", "dapi" + fake("dapi", HEX, 32)),
    Secret("postman", "postman", f"PMAK-{fake('pmak1', HEX, 24)}-{fake('pmak2', HEX, 34)}"),
    Secret("grafana", "grafana-service-account", f"glsa_{fake('glsa1', ALNUM, 32)}_{fake('glsa2', HEX, 8)}"),
    Secret("grafana", "grafana-cloud", "glc_" + fake("glc", B64, 120)),
    Secret("atlassian", "atlassian-api", "ATATT3xFfGF0" + fake("atatt", URLSAFE, 170) + "=" + fake("atatt2", HEX, 8)),
    Secret("linear", "linear", "lin_api_" + fake("linear", ALNUM, 40)),
    Secret("notion", "notion-legacy", "secret_" + fake("notion", ALNUM, 43)),
    Secret("notion", "notion", "ntn_" + fake("ntn", ALNUM, 46)),
    Secret("newrelic", "newrelic-user", "NRAK-" + fake("nrak", UPPER + DIGITS, 27)),
    Secret("supabase", "supabase", "sbp_" + fake("sbp", HEX, 40)),
    Secret("groq", "groq", "gsk_" + fake("gsk", ALNUM, 52)),
    Secret("replicate", "replicate", "r8_" + fake("r8", ALNUM, 37)),
    Secret("perplexity", "perplexity", "pplx-" + fake("pplx", ALNUM, 48)),
    Secret("xai", "xai", "xai-" + fake("xai", ALNUM, 80)),
    Secret("age", "age-secret-key", "AGE-SECRET-KEY-1" + fake("age", UPPER + DIGITS, 58)),
    Secret("doppler", "doppler-service", "dp.st.prd." + fake("doppler", ALNUM, 40)),
    Secret("square", "square-access", "EAAA" + fake("square", URLSAFE, 60)),
    Secret("square", "square-oauth-secret", "sq0csp-" + fake("sq0csp", URLSAFE, 43)),
    Secret("facebook", "facebook-access", "EAACEdEose0cBA" + fake("fb", ALNUM, 150)),
    Secret("mapbox", "mapbox-secret", f"sk.eyJ1Ijoi{fake('mapbox1', ALNUM, 30)}.{fake('mapbox2', URLSAFE, 22)}"),
    Secret("firebase", "firebase-fcm", f"AAAA{fake('fcm1', URLSAFE, 7)}:APA91b{fake('fcm2', URLSAFE, 134)}"),
    Secret("dropbox", "dropbox", "sl.u.AF" + fake("dropbox", URLSAFE, 160)),
    Secret("sentry", "sentry-auth", "sntrys_" + fake("sntrys", B64, 160)),
    Secret("heroku", "heroku", "HRKU-AA" + fake("heroku", URLSAFE, 58)),
    Secret("azure", "azure-ad-client-secret", fake("azad1", ALNUM, 3) + "8Q~" + fake("azad2", URLSAFE + "~.", 34)),
    Secret("fly", "fly", "fm2_" + fake("fly", B64, 200)),
    Secret("docker", "docker-hub", "dckr_pat_" + fake("dckr", URLSAFE, 27)),
    Secret("brevo", "brevo", f"xkeysib-{fake('brevo1', HEX, 64)}-{fake('brevo2', ALNUM, 16)}"),
    Secret("figma", "figma", "figd_" + fake("figma", URLSAFE, 40)),
    Secret("airtable", "airtable", f"pat{fake('airtable1', ALNUM, 14)}.{fake('airtable2', HEX, 64)}"),
    Secret("langsmith", "langsmith", f"lsv2_pt_{fake('lsv1', HEX, 32)}_{fake('lsv2', HEX, 10)}"),
    Secret("pinecone", "pinecone", "pcsk_" + fake("pcsk", ALNUM + "_", 70)),
    Secret("terraform", "terraform-cloud", f"{fake('tfc1', ALNUM, 14)}.atlasv1.{fake('tfc2', ALNUM, 67)}"),
    Secret("pulumi", "pulumi", "pul-" + fake("pulumi", HEX, 40)),
    Secret("netlify", "netlify", "nfp_" + fake("netlify", ALNUM, 36)),
    # no prefix: found as long random tokens
    Secret("random", "cloudflare-api-token", fake("cloudflare", URLSAFE, 40)),
    Secret("random", "mistral-api-key", fake("mistral", ALNUM, 32)),
    Secret("random", "okta-api-token", "00" + fake("okta", URLSAFE, 40)),
    Secret("random", "random-base62-24", fake("base62-24", ALNUM, 24)),
    Secret("random", "random-base64-64", fake("base64-64", B64, 64) + "=="),
    Secret("random", "random-urlsafe-43", fake("urlsafe-43", URLSAFE, 43)),
    # private keys
    Secret("pem", "pem-rsa", _pem("RSA PRIVATE KEY", "pem-rsa")),
    Secret("pem", "pem-pkcs8", _pem("PRIVATE KEY", "pem-pkcs8")),
    Secret("pem", "pem-ec", _pem("EC PRIVATE KEY", "pem-ec", 2)),
    Secret("pem", "pem-openssh", _pem("OPENSSH PRIVATE KEY", "pem-openssh")),
    Secret("pem", "pem-encrypted", _pem("ENCRYPTED PRIVATE KEY", "pem-encrypted")),
    Secret("pem", "pem-dsa", _pem("DSA PRIVATE KEY", "pem-dsa", 3)),
    Secret("pem", "pgp-private-block", _pem("PGP PRIVATE KEY BLOCK", "pgp", 8)),
    # JSON web tokens
    Secret("jwt", "jwt-hs256", _jwt("jwt1", '{"alg":"HS256","typ":"JWT"}', '{"sub":"1234","name":"Ann","iat":1}', 43)),
    Secret(
        "jwt",
        "jwt-rs256",
        _jwt("jwt2", '{"alg":"RS256","kid":"k1"}', '{"iss":"https://id.example.com","aud":"api","exp":1}', 342),
    ),
    Secret("jwt", "jwt-unsigned", _jwt("jwt3", '{"alg":"none"}', '{"sub":"admin","role":"root"}', 0)),
    # payment cards (the networks' published test numbers: Luhn-valid, never issued)
    Secret("card", "visa", "4111111111111111"),
    Secret("card", "visa-2", "4012888888881881"),
    Secret("card", "visa-13", "4222222222222"),
    Secret("card", "mastercard", "5555555555554444"),
    Secret("card", "mastercard-2", "5105105105105100"),
    Secret("card", "mastercard-2series", "2223003122003222"),
    Secret("card", "amex", "378282246310005"),
    Secret("card", "amex-2", "371449635398431"),
    Secret("card", "discover", "6011111111111117"),
    Secret("card", "discover-2", "6011000990139424"),
    Secret("card", "jcb", "3530111333300000"),
    Secret("card", "diners", "30569309025904"),
    Secret("card", "unionpay", "6200000000000005"),
    Secret("card", "visa-spaced", "4111 1111 1111 1111"),
    Secret("card", "mastercard-dashed", "5555-5555-5555-4444"),
    Secret("card", "amex-grouped", "3782 822463 10005"),
    # email addresses (personal data)
    Secret("email", "email-plain", "jane.doe@example.com"),
    Secret("email", "email-plus", "j.smith+billing@mail.example.co.uk"),
    Secret("email", "email-underscore", "ops_team@sub.example.org"),
    Secret("email", "email-short", "x@y.io"),
    Secret("email", "email-dashed-domain", "first.last@example-company.com"),
    Secret("email", "email-upper", "USER123@EXAMPLE.NET"),
    Secret("email", "email-digits", "player4821@mail.example.games"),
)

PLAIN: tuple[Secret, ...] = (
    Secret("password", "password-word", "hunter2"),
    Secret("password", "password-symbols", "Tr0ub4dor&3"),
    Secret("password", "password-long", "correct-horse-battery-staple"),
    Secret("password", "password-mixed", "P@ssw0rd!2024"),
    Secret("password", "password-unicode", "pässwörd-Ünïcode9"),
    Secret("password", "password-generated", "xK9mP2vL5qR8"),
    Secret("pin", "pin-4", "4821"),
    Secret("pin", "pin-6", "739104"),
    Secret("cvv", "cvv", "837"),
    Secret("otp", "otp-code", "552910"),
    Secret("hex", "datadog-api-key", fake("datadog", HEX, 32)),
    Secret("hex", "twilio-auth-token", fake("twilio-auth", HEX, 32)),
    Secret("hex", "hex-64", fake("hex-64", HEX, 64)),
    Secret("uuid", "heroku-legacy-key", "3f2b1c9e-8a4d-4e6f-9b2a-7c1d5e8f0a3b"),
)

# Carriers of a PLAIN secret `{s}`: the shapes in which a context names it as one.
CARRIERS: tuple[tuple[str, str, str], ...] = (
    # credentials in URLs
    ("url", "postgres-url", "postgres://app:{s}@db.internal:5432/orders"),
    ("url", "postgresql-driver-url", "postgresql+psycopg://app:{s}@10.0.0.5/orders?sslmode=require"),
    ("url", "mysql-url", "mysql://root:{s}@localhost:3306/app"),
    ("url", "mongodb-srv-url", "mongodb+srv://admin:{s}@cluster0.ab1cd.mongodb.net/?retryWrites=true&w=majority"),
    ("url", "redis-url-no-user", "redis://:{s}@cache.internal:6379/0"),
    ("url", "rediss-url", "rediss://default:{s}@redis.example.com:6380"),
    ("url", "amqp-url", "amqp://guest:{s}@rabbit:5672/%2f"),
    ("url", "https-userinfo", "https://deploy:{s}@git.example.com/team/repo.git"),
    ("url", "ftp-url", "ftp://backup:{s}@files.example.com/dumps/"),
    ("url", "smtp-url", "smtp://mailer:{s}@smtp.example.com:587"),
    ("url", "sentry-dsn", "https://{s}@o123456.ingest.sentry.io/7890123"),
    ("url", "git-token-user", "https://oauth2:{s}@gitlab.example.com/group/project.git"),
    ("query", "jdbc-password", "jdbc:postgresql://db:5432/app?user=app&password={s}&ssl=true"),
    ("query", "query-api-key", "https://api.example.com/v1/items?api_key={s}&page=2"),
    ("query", "query-access-token", "https://graph.example.com/me?fields=id&access_token={s}"),
    ("query", "query-client-secret", "/oauth/token?grant_type=client_credentials&client_id=web&client_secret={s}"),
    ("query", "query-token", "wss://events.example.com/stream?token={s}"),
    ("query", "query-key", "https://maps.example.com/api/js?key={s}&callback=init"),
    (
        "query",
        "s3-presigned",
        "https://bucket.s3.amazonaws.com/f.pdf?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature={s}",
    ),
    ("query", "azure-sas", "https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sp=r&se=2030-01-01&sig={s}"),
    ("query", "query-password-form", "username=ann&password={s}&remember=1"),
    # KEY=value environment and configuration text
    ("env", "env-line", "DATABASE_PASSWORD={s}"),
    ("env", "env-export", "export GITHUB_TOKEN={s}"),
    ("env", "env-quoted", 'STRIPE_API_KEY="{s}"'),
    ("env", "env-single-quoted", "PGPASSWORD='{s}' psql -h db -U app"),
    ("env", "env-aws-secret", "AWS_SECRET_ACCESS_KEY={s}"),
    ("env", "env-secret-key-base", "SECRET_KEY_BASE={s}"),
    ("env", "env-docker-flag", "docker run -e POSTGRES_PASSWORD={s} postgres:16"),
    ("env", "env-windows-set", "set ADMIN_PASS={s}"),
    ("env", "env-powershell", '$env:OPENAI_API_KEY = "{s}"'),
    ("env", "yaml-password", "db:\n  host: db.internal\n  password: {s}\n  pool: 5"),
    ("env", "yaml-quoted", 'api_key: "{s}"'),
    ("env", "toml-client-secret", 'client_secret = "{s}"'),
    ("env", "ini-pass", "[mysql]\nuser = app\npass = {s}"),
    ("env", "npmrc-auth-token", "//registry.npmjs.org/:_authToken={s}"),
    ("env", "pypirc-password", "[pypi]\nusername = __token__\npassword = {s}"),
    ("env", "netrc", "machine api.example.com login ann password {s}"),
    ("env", "cli-flag-equals", "mysqldump --user=app --password={s} orders"),
    ("env", "cli-flag-space", "vault login --token {s}"),
    ("env", "ado-connection-string", "Server=tcp:sql.example.net,1433;Database=app;User ID=app;Password={s};"),
    ("env", "azure-account-key", "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={s};EndpointSuffix=core"),
    ("env", "python-kwarg", "client = Client(api_key='{s}', timeout=30)"),
    ("env", "json-like-text", 'then call login with {{"user": "ann", "password": "{s}"}} and retry'),
    ("env", "escaped-json-text", '{{\\"user\\":\\"ann\\",\\"pin\\":\\"{s}\\"}}'),
    ("env", "prose-colon", "Your OTP: {s} (valid for ten minutes)"),
    ("env", "card-cvv", "card ending 4242, CVV: {s}, exp 09/29"),
    ("env", "dsn-assignment", "SENTRY_DSN={s}"),
    ("env", "connection-string-key", "connection_string={s}"),
    # HTTP headers and auth schemes
    ("header", "authorization-bearer", "Authorization: Bearer {s}"),
    ("header", "authorization-token", "Authorization: Token {s}"),
    ("header", "proxy-authorization", "Proxy-Authorization: Bearer {s}"),
    ("header", "x-api-key", "X-Api-Key: {s}"),
    ("header", "x-auth-token", "X-Auth-Token: {s}"),
    ("header", "private-token", "PRIVATE-TOKEN: {s}"),
    ("header", "cookie", "Cookie: theme=dark; sessionid={s}; lang=en"),
    ("header", "set-cookie", "Set-Cookie: __Host-session={s}; Path=/; Secure; HttpOnly"),
    ("header", "curl-header", 'curl -H "Authorization: Bearer {s}" https://api.example.com/v1/me'),
    ("header", "curl-user", "curl -u admin:{s} https://jenkins.example.com/api/json"),
    ("header", "raw-request", "GET /v1/me HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer {s}\r\n\r\n"),
    ("basic", "basic-header", "Authorization: Basic {basic}"),
    ("basic", "basic-bare", "retry with Basic {basic} against the proxy"),
    ("basic", "basic-in-curl", "curl -H 'Authorization: Basic {basic}' https://registry.example.com/v2/"),
)


def carried(template: str, secret: str) -> str:
    return template.format(s=secret, basic=b64(f"admin:{secret}"))


# Ordinary text that must come out unchanged: prose, code, identifiers, and values that are not secrets by
# this project's choice (UUIDs, hashes, hex digests, timestamps, version strings: they carry no credential and
# traces need them to be useful; a hex key is redacted only where its context names it, see PLAIN).
ORDINARY: tuple[str, ...] = (
    "The quick brown fox jumps over the lazy dog.",
    "Steve asked the allay to bring him three diamonds from the chest near the nether portal.",
    "Please summarise the last five messages and list any open questions.",
    "I think the password policy should require at least twelve characters.",
    "Rotate your keys every ninety days; never share a token in a chat.",
    "The author of the keyboard review said the keys feel mushy.",
    "Basic understanding of Kafka consumer groups is assumed in this chapter.",
    "A bearer bond is paid to whoever holds it.",
    "Token usage: 1843 input tokens, 212 output tokens, 2055 in total.",
    "We met at 10:30 on 2024-11-05 and agreed on version 2.14.1 of the client.",
    "Call me at the office tomorrow; the meeting room is B-204.",
    "Session started; the user opened three tabs and closed two of them.",
    "The secret to good bread is patience and a hot oven.",
    "Authentication failed three times, so the account was locked for 15 minutes.",
    "Our API returns 429 when you exceed 100 requests per minute.",
    "She said: keep calm and carry on.",
    "Note: the cache is warmed at startup.",
    "Error: connection refused (os error 111)",
    "Warning: deprecated option --legacy-mode will be removed in 3.0",
    "Total: 42 items, 3 failed, 39 passed.",
    "Visit https://docs.example.com/guide/getting-started#install for details.",
    "See https://github.com/example/project/blob/main/README.md and the wiki.",
    "Download from https://cdn.example.com/releases/v1.2.3/app-linux-x86_64.tar.gz",
    "The endpoint is https://api.example.com/v1/users?page=2&per_page=50&sort=created",
    "Compare 3f2b1c9e-8a4d-4e6f-9b2a-7c1d5e8f0a3b with 7c1d5e8f-0a3b-4e6f-9b2a-3f2b1c9e8a4d.",
    "commit 9fceb02d0ae598e95dc970b74767f19372d61af8 fixed the race in the fold step",
    "sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "md5 d41d8cd98f00b204e9800998ecf8427e",
    "run_id=run-2024-11-05-000123 seq=17 offset=1877 partition=5",
    "timestamp 1730800000000 is in milliseconds",
    "order 1234567890123 shipped; tracking 9400111899223856923512",
    "The square root of 2 is about 1.4142135623730951.",
    "def get_user_profile_by_id(user_id: int) -> UserProfile:",
    "const handleSubmitButtonClick = async (event) => { await saveDraft(event.target.value); };",
    "SELECT id, name, created_at FROM accounts WHERE status = 'active' ORDER BY created_at DESC LIMIT 50;",
    "for (int i = 0; i < items.length; i++) { total += items[i].price * items[i].quantity; }",
    "import { AbstractSingletonProxyFactoryBean } from './factories/AbstractSingletonProxyFactoryBean';",
    "kubectl get pods --namespace=production --selector=app.kubernetes.io/name=memlog-worker",
    "docker run --rm -p 8080:8080 ghcr.io/example/memlog-api:1.4.2",
    "pip install 'pydantic-settings>=2.6,<3' fastavro==1.10.0",
    "src/components/UserProfileCard/UserProfileCardHeader.tsx",
    "/var/lib/kafka/data/memlog.threads-5/00000000000000001877.log",
    "C:\\Users\\Ann\\AppData\\Local\\Programs\\Python\\Python311\\python.exe",
    "ERROR 2024-11-05T10:31:02.123Z memlog.projector partition=5 offset=1844 lag=33",
    "java.lang.IllegalStateException: Expected BEGIN_OBJECT but was STRING at line 1 column 1",
    'Traceback (most recent call last): File "app.py", line 12, in <module>',
    "The model returned finish_reason=stop after 212 tokens.",
    "getElementById('submit-button').addEventListener('click', onSubmitClicked);",
    "The public key is ssh-ed25519 on the bastion; ask ops for access.",
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 348\r\n",
    "Cache-Control: no-cache, no-store, must-revalidate",
    "max_tokens=1024 temperature=0.2 top_p=0.95 presence_penalty=0",
    "The monkey took the keyboard and pressed every key twice.",
    "Passengers must pass through gate 12 with their passports ready.",
    "UserProfileServiceImplementationFactory handles the wiring.",
    "translateAddressToCoordinatesWithFallback",
    "ThisIsAVeryLongCamelCaseIdentifierName2",
    "de.example.memlog.projections.traces.TraceDocumentBuilder",
    "my-company-production-eu-west-1-worker-pool-7",
    "2024-11-05T10:31:02.123456+00:00",
    "The RSA algorithm uses a public key and a private key; we discussed BEGIN and END markers.",
    "card game: draw 5 cards, then discard 2",
    "version 4.111.1111 of the tool",
    "ISBN 978-0-306-40615-7",
    "data:image/png;base64 images are not inlined in this report",
    "aGVsbG8gd29ybGQsIHRoaXMgaXMgYSBwbGFpbiBtZXNzYWdl",  # base64 of an ordinary sentence
    "eW91ciBvcmRlciBoYXMgc2hpcHBlZCBhbmQgd2lsbCBhcnJpdmUgc29vbg==",
    "PBKDF2WithHmacSHA256 is the key derivation function",
    "The key insight is that the log is the source of truth.",
    "Reply with the key points only.",
    "auth flow: redirect, consent, callback, exchange",
    "a secret santa draw for the team",
    "the token bucket refills at 10 tokens per second",
    "git@github.com:example/memlog.git",
    "user@host is how ssh names a login",
    "Press any key to continue",
    "password reset emails are sent from a no-reply address",
    'tokens: ["hello", " world"]',
    "The function returns a Promise<Map<string, Array<number>>>.",
    "x = base64.b64encode(payload).decode('ascii')",
    "ObjectId('507f1f77bcf86cd799439011')",
    "MIT License, Copyright (c) 2024 Example Corp",
    "Dear team, the quarterly report is attached. Best regards, Ann",
)
