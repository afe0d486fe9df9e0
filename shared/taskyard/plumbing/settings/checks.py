"""The checks and parsers settings share: a variable's name, URLs, comma lists, API keys,
tenants' seconds, sentinels, credentials, the tenant-token secret, and the broker's place
beside the store.

Each ValueError names the variable and its format and never repeats a secret or a URL (a URL
may hold a password)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Annotated
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pydantic import AfterValidator, SecretStr, ValidationInfo
from redis.connection import parse_url

__all__ = [
    "HTTP_SCHEMES",
    "REDIS_SCHEMES",
    "broker_database",
    "check_module_names",
    "check_size",
    "check_token_secret",
    "check_url",
    "env_name",
    "items",
    "on_db",
    "parse_api_keys",
    "parse_credentials",
    "parse_sentinels",
    "parse_tenant_seconds",
    "split_networks",
    "variable",
]

REDIS_SCHEMES = ("redis", "rediss", "unix", "redis+socket", "sentinel")
HTTP_SCHEMES = ("http", "https")

_PLACEHOLDER_KEYS = {"changeme", "secret"}
# Tenant names become part of Redis keys ("session:{tenant}:{session}"): no ":" in them.
_TENANT = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_MODULE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_SIZE = re.compile(r"[0-9]+[kmgKMG]?")  # what Docker and the local sandbox both read


def env_name(field: str) -> str:
    """The environment variable that sets `field`."""
    return f"TASKYARD_{field.upper()}"


def variable(info: ValidationInfo) -> str:
    """The environment variable of the field a validator checks."""
    return env_name(info.field_name or "")


def items(text: str) -> list[str]:
    """The non-empty, stripped items of a comma-separated setting."""
    return [item.strip() for item in text.split(",") if item.strip()]


def split_networks(value: object) -> object:
    """Comma-separated CIDRs as a tuple of texts, for pydantic to parse each."""
    if isinstance(value, str):
        return tuple(items(value))
    return value


def parse_api_keys(text: str) -> dict[str, str]:
    """API key to tenant, from "key=tenant" pairs separated by commas. The ValueError says
    what is wrong without repeating a key."""
    form = "TASKYARD_API_KEYS must be key=tenant pairs separated by commas (k1=team-a,k2=team-b)"
    tenants: dict[str, str] = {}
    for number, item in enumerate(items(text), 1):
        key, sep, tenant = (part.strip() for part in item.partition("="))
        if not (sep and key and tenant):
            raise ValueError(f"{form}; pair {number} is not key=tenant")
        if not _TENANT.fullmatch(tenant):
            raise ValueError(
                f"tenant {tenant!r} (pair {number} of TASKYARD_API_KEYS): use up to 64 "
                "letters, digits, '_', '.' or '-'"
            )
        if key.lower() in _PLACEHOLDER_KEYS:
            raise ValueError(f"the key of pair {number} of TASKYARD_API_KEYS is a placeholder")
        if tenants.setdefault(key, tenant) != tenant:
            raise ValueError(f"pair {number} of TASKYARD_API_KEYS repeats a key for a new tenant")
    if not tenants:
        raise ValueError(f"{form}; it names none")
    return tenants


@lru_cache(maxsize=16)  # read on every submission; the text is a frozen setting's
def parse_tenant_seconds(text: str, where: str) -> Mapping[str, float]:
    """Tenant to seconds, from "tenant=seconds" pairs separated by commas. The ValueError
    names `where` (the variable), the pair and the format."""
    form = f"{where} must be tenant=seconds pairs separated by commas (batch=86400,lookup=60)"
    found: dict[str, float] = {}
    for number, item in enumerate(items(text), 1):
        tenant, sep, seconds = (part.strip() for part in item.partition("="))
        if not (sep and _TENANT.fullmatch(tenant) and _positive(seconds)):
            raise ValueError(f"{form}; pair {number} is not tenant=seconds (seconds over 0)")
        if tenant in found:
            raise ValueError(f"{form}; pair {number} repeats tenant {tenant!r}")
        found[tenant] = float(seconds)
    return found


def _positive(text: str) -> bool:
    try:
        return math.isfinite(number := float(text)) and number > 0
    except ValueError:
        return False


def parse_sentinels(text: str) -> tuple[tuple[str, int], ...]:
    """(host, port) of each sentinel, from "host:port" entries separated by commas (an IPv6
    host in brackets: "[fd00::1]:26379"). The ValueError names the entry and the format."""
    form = (
        "TASKYARD_REDIS_SENTINELS must be host:port entries separated by commas "
        "(10.0.0.1:26379,10.0.0.2:26379)"
    )
    found = []
    for number, item in enumerate(items(text), 1):
        host, sep, port = item.rpartition(":")
        host = host.removeprefix("[").removesuffix("]")
        if not (sep and host and port.isdigit() and 0 < int(port) < 65536):
            raise ValueError(f"{form}; entry {number} ({item!r}) is not host:port")
        found.append((host, int(port)))
    return tuple(found)


def check_url(value: str, schemes: tuple[str, ...], where: str, host: bool = True) -> None:
    """Refuse a URL outside `schemes` or without a host (`host`), naming `where` it came from."""
    parts = urlsplit(value)
    if parts.scheme not in schemes or not (parts.netloc or (not host and parts.path)):
        raise ValueError(
            f"{where} needs a URL starting with {' or '.join(s + '://' for s in schemes)}"
        )  # the value is not repeated: a URL may hold a password


def _redis_url(value: str, info: ValidationInfo) -> str:
    check_url(value, REDIS_SCHEMES, variable(info), host=False)
    return value


def _http_url(value: str, info: ValidationInfo) -> str:
    check_url(value, HTTP_SCHEMES, variable(info))
    return value


def _http_url_or_empty(value: str, info: ValidationInfo) -> str:
    return _http_url(value, info) if value else value


# A setting's URL, checked where the field is declared (the message names its variable).
RedisUrl = Annotated[str, AfterValidator(_redis_url)]
HttpUrl = Annotated[str, AfterValidator(_http_url)]
HttpUrlOrEmpty = Annotated[str, AfterValidator(_http_url_or_empty)]  # empty: not used


def check_module_names(value: str, where: str) -> None:
    """Refuse a comma-separated list holding something that is not an importable name."""
    for name in items(value):
        if not _MODULE.fullmatch(name):
            raise ValueError(
                f"{where}: {name!r} is not a module name; give importable names "
                "separated by commas (my_pkg.agents,my_pkg.tools)"
            )


def check_size(value: str, where: str) -> None:
    """Refuse a size Docker and the local sandbox would not both read."""
    if not _SIZE.fullmatch(value):
        raise ValueError(
            f"{where} must be a number of bytes, optionally followed by k, m or g "
            f"(256m); not {value!r}"
        )


def parse_credentials(value: SecretStr, where: str) -> dict[tuple[str, str], str]:
    """(tenant, name) to token, from JSON ``{"tenant": {"name": "token"}}`` ("" is none). The
    ValueError says what is wrong without repeating a token."""
    text = value.get_secret_value().strip()
    if not text:
        return {}
    form = f'{where} must be JSON: {{"tenant": {{"credential name": "token"}}}}'
    try:
        tenants = json.loads(text)
    except ValueError:
        raise ValueError(f"{form}; it is not JSON") from None
    if not isinstance(tenants, dict):
        raise ValueError(form)
    found: dict[tuple[str, str], str] = {}
    for tenant, named in tenants.items():
        if not isinstance(named, dict):
            raise ValueError(f"{form}; tenant {tenant!r} maps to no object")
        for name, token in named.items():
            if not (isinstance(token, str) and token.strip()):
                raise ValueError(f"{form}; {tenant!r}/{name!r} is not a non-empty string")
            found[tenant, name] = token.strip()
    return found


def check_token_secret(value: SecretStr, where: str) -> None:
    """Refuse a tenant-token secret that is short or a placeholder (empty is allowed: off)."""
    secret = value.get_secret_value()
    if secret and (len(secret) < 32 or secret.lower() in _PLACEHOLDER_KEYS):
        raise ValueError(
            f"{where} must be at least 32 characters and not a placeholder "
            "(openssl rand -hex 32), or empty to leave tenant tokens off"
        )


def on_db(url: str, db: int) -> str:
    """`url` with its database number replaced by `db`."""
    parts = urlsplit(url)
    if parts.scheme == "unix":  # the database is a query parameter there
        query = [(k, v) for k, v in parse_qsl(parts.query) if k != "db"] + [("db", str(db))]
        return f"unix://{parts.path}?{urlencode(query)}"
    return urlunsplit(parts._replace(path=f"/{db}"))


def broker_database(store_url: str, broker_url: str, sentinel: bool = False) -> int:
    """The broker's database number, checked to be on the store's Redis server: a commit and
    the jobs it starts are one atomic write (see `taskyard.runtime.jobs`). Under Sentinel both are
    on the master it names, whatever the URLs' hosts say."""
    store, broker = parse_url(store_url), parse_url(broker_url)
    if sentinel:
        return int(broker.get("db", 0))
    if any(store.get(k) != broker.get(k) for k in ("host", "port", "path")):
        raise ValueError(
            "TASKYARD_BROKER_URL must be on the same Redis server as TASKYARD_REDIS_URL "
            "(another database number is fine): a step's commit and the jobs it starts are "
            "one atomic write"
        )
    return int(broker.get("db", 0))
