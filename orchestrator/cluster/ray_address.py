"""`--ray-address`: parsed (scheme, host, port) before anything is written.

Why: a malformed address ("not a url") used to reach the Jobs client only after `submit` had written the ledger
and cluster.json, and then read as "cluster unreachable" (exit 3). It is bad input: exit 2, nothing written.

Accepted: `HOST:PORT`, `http://HOST[:PORT]` or `https://HOST[:PORT]` (the Ray dashboard / Jobs API, as
`ray job submit --address` takes it); HOST is a DNS name, an IPv4 address or a bracketed IPv6 address; PORT
is 1..65535. `ray://` (Ray Client) is not the Jobs API and is refused with the fix.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit
from wtcommon.errors import UserError

_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = re.compile(rf"(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})*\.?")
SCHEMES = ("http", "https")


class RayAddressError(UserError):
    """The --ray-address is not a Ray dashboard address; the message names the option and the fix."""


def parse_ray_address(address: str) -> str:
    """The address as the Jobs client takes it (`http://` added to `HOST:PORT`); RayAddressError when malformed."""
    raw = address.strip()
    fix = "give the Ray dashboard address, e.g. --ray-address http://10.0.0.5:8265 or 10.0.0.5:8265"
    if not raw:
        raise RayAddressError(f"--ray-address {address!r}: empty; {fix}")
    url = raw if "://" in raw else f"http://{raw}"
    try:
        parts = urlsplit(url)
        port = parts.port  # ValueError for a non-numeric or out-of-range port
    except ValueError as exc:
        raise RayAddressError(f"--ray-address {address!r}: {exc}; {fix}") from None
    if parts.scheme not in SCHEMES:
        raise RayAddressError(f"--ray-address {address!r}: scheme {parts.scheme!r} is not the Jobs API "
                              f"({' or '.join(SCHEMES)}); {fix}")
    host = parts.hostname or ""
    if parts.username or parts.password or parts.query or parts.fragment or parts.path not in ("", "/"):
        raise RayAddressError(f"--ray-address {address!r}: only scheme, host and port are allowed; {fix}")
    ipv6 = parts.netloc.startswith("[")
    if not host or (not ipv6 and not _HOSTNAME.fullmatch(host)):
        raise RayAddressError(f"--ray-address {address!r}: {host or 'no host'!r} is not a host name or IP address; "
                              f"{fix}")
    if port is not None and port == 0:
        raise RayAddressError(f"--ray-address {address!r}: port 0; ports are 1..65535; {fix}")
    return url.rstrip("/")
