"""Is a URL safe to fetch? Only public http(s) hosts, however the address is spelled.

Manifests are shared files, so a ``data_files`` URL must not be able to make evalnb read
from the user's own machine or network (SSRF). Every spelling of an address that some
parser accepts (``2130706433``, ``0x7f.1``, ``[::ffff:127.0.0.1]``, ``127。0。0。1`` ...) is
decoded here, and host names are resolved: if any address is not public, the URL is refused.
A download then connects to an address from that same lookup (``public_addresses``), never
to whatever a second lookup would say. ``check_url_literal`` is the part that needs no
lookup, which the manifest schema applies to every ``data_files`` URL.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable
from urllib.parse import urlsplit

from evalnb.errors import DatasetError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, "int | None", str], list[IPAddress]]  # (host, port, url) -> addresses

_SHARED = ipaddress.IPv4Network("100.64.0.0/10")  # carrier-grade NAT; not is_private in 3.11
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_SIIT = ipaddress.IPv6Network("::ffff:0:0:0/96")  # IPv4-translated addresses
_HOST_CHARS = re.compile(r"[a-z0-9_.-]+")
_NUMERIC_LABEL = re.compile(r"0x[0-9a-f]*|[0-9]+")
_LOCAL_NAMES = ("localhost", "localhost.localdomain")


def check_public_url(url: str, *, allow_private: bool = False, resolver: Resolver | None = None) -> None:
    """Raise DatasetError unless ``url`` is http(s) and its host is public.

    ``allow_private`` skips the address check (scheme and syntax are still enforced); it
    exists for tests that serve data from 127.0.0.1 and is never set from a manifest.
    """
    if allow_private:
        _split_host(url)
        return
    public_addresses(url, resolver=resolver)


def check_url_literal(url: str) -> None:
    """What can be refused without a DNS lookup: the syntax, and a host that is an unsafe
    address in any spelling or a name for the local machine (``localhost``)."""
    host, _, bracketed = _split_host(url)
    literal = _ip_literal(host, bracketed, url)
    if literal is not None:
        if not is_public_address(literal):
            raise DatasetError(f"URL {url!r}: host {host!r} is {_describe(literal)}; only public hosts are allowed")
    elif host in _LOCAL_NAMES or host.endswith(".localhost"):
        raise DatasetError(f"URL {url!r}: host {host!r} is the local machine; only public hosts are allowed")


def public_addresses(url: str, *, allow_private: bool = False, resolver: Resolver | None = None,
                     allow: Callable[[IPAddress], bool] | None = None) -> tuple[str, int | None, list[IPAddress]]:
    """(host, port, addresses) of ``url``, every address checked to be public.

    The lookup a download connects by: the caller connects to one of exactly these
    addresses, so a name that resolves differently a moment later (DNS rebinding) cannot
    redirect the connection past the check. ``resolver(host, port, url)`` stands in for DNS
    and ``allow`` for `is_public_address` in tests (which may only reach this machine).
    """
    host, port, bracketed = _split_host(url)
    allowed = (lambda a: True) if allow_private else (allow or is_public_address)
    literal = _ip_literal(host, bracketed, url)
    if literal is not None:
        if not allowed(literal):
            raise DatasetError(f"URL {url!r}: host {host!r} is {_describe(literal)}; only public hosts are allowed")
        return host, port, [literal]
    if not allow_private and allow is None and (host in _LOCAL_NAMES or host.endswith(".localhost")):
        raise DatasetError(f"URL {url!r}: host {host!r} is the local machine; only public hosts are allowed")
    addresses = (resolver or _resolve)(host, port, url)
    for address in addresses:
        if not allowed(address):
            raise DatasetError(
                f"URL {url!r}: host {host!r} resolves to {_describe(address)}; only public hosts are allowed"
            )
    return host, port, addresses


def is_public_address(address: IPAddress) -> bool:
    """True for globally routable unicast addresses; IPv6 forms that embed IPv4 are judged by it."""
    if address.version == 6:
        embedded = _embedded_ipv4(address)  # type: ignore[arg-type]
        if embedded is not None:
            return is_public_address(embedded)
        if address.is_site_local:  # type: ignore[union-attr]
            return False
    elif address in _SHARED:
        return False
    return address.is_global and not (
        address.is_private
        or address.is_loopback
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
    )


def _split_host(url: str) -> tuple[str, int | None, bool]:
    """Return (normalised host, port, host was a bracketed IPv6 literal) or raise."""
    if not isinstance(url, str) or not url:
        raise DatasetError(f"URL {url!r}: expected a non-empty string")
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        raise DatasetError(f"URL {url!r}: contains whitespace or control characters")
    if "\\" in url:
        raise DatasetError(f"URL {url!r}: contains a backslash")
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # urlsplit validates bracketed hosts itself
        raise DatasetError(f"URL {url!r}: malformed URL ({exc})") from None
    if parts.scheme not in ("http", "https"):
        found = parts.scheme or "none"
        raise DatasetError(f"URL {url!r}: only http and https URLs are allowed (found scheme {found!r})")
    netloc = parts.netloc
    if not netloc:
        raise DatasetError(f"URL {url!r}: missing host")
    if "@" in netloc:
        raise DatasetError(f"URL {url!r}: credentials (user@host) are not allowed in URLs")
    if netloc.startswith("["):
        end = netloc.find("]")
        if end < 0:
            raise DatasetError(f"URL {url!r}: unterminated IPv6 address")
        host, rest, bracketed = netloc[1:end], netloc[end + 1 :], True
        if rest and not rest.startswith(":"):
            raise DatasetError(f"URL {url!r}: unexpected text after IPv6 address")
        port_text = rest[1:]
    else:
        if netloc.count(":") > 1:
            raise DatasetError(f"URL {url!r}: IPv6 addresses must be in brackets")
        host, _, port_text = netloc.partition(":")
        bracketed = False
    port = _port(port_text, url)
    if "%" in host:
        raise DatasetError(f"URL {url!r}: percent-encoded hosts and IPv6 zone ids are not allowed")
    if not bracketed:
        host = _normalise_name(host, url)
    if not host:
        raise DatasetError(f"URL {url!r}: missing host")
    return host.lower(), port, bracketed


def _port(text: str, url: str) -> int | None:
    if not text:
        return None
    if not text.isascii() or not text.isdigit() or not 0 < int(text) < 65536:
        raise DatasetError(f"URL {url!r}: invalid port {text!r}")
    return int(text)


def _normalise_name(host: str, url: str) -> str:
    """IDNA-encode (which maps full-width digits and ideographic dots) and drop one trailing dot."""
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError as exc:
            raise DatasetError(f"URL {url!r}: invalid international host name ({exc})") from None
    host = host.lower()
    if host.endswith("."):
        host = host[:-1]
    if host and (not _HOST_CHARS.fullmatch(host) or "" in host.split(".")):
        raise DatasetError(f"URL {url!r}: malformed host {host!r}")
    return host


def _ip_literal(host: str, bracketed: bool, url: str) -> IPAddress | None:
    """Decode an address literal the lenient way resolvers do; None for a host name."""
    if bracketed:
        try:
            return ipaddress.IPv6Address(host)
        except ValueError:
            raise DatasetError(f"URL {url!r}: malformed IPv6 address {host!r}") from None
    if not _NUMERIC_LABEL.fullmatch(host.rsplit(".", 1)[-1]):
        return None
    # Like browsers (WHATWG "ends in a number"), a host whose last label is numeric must be IPv4.
    address = _loose_ipv4(host)
    if address is None:
        raise DatasetError(f"URL {url!r}: host {host!r} is not a valid IPv4 address")
    return address


def _loose_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """inet_aton rules: 1-4 parts, each decimal, 0x-hex or 0-octal; the last fills the rest."""
    parts = host.split(".")
    if len(parts) > 4:
        return None
    numbers = []
    for part in parts:
        if part[:2] == "0x":
            digits, base = part[2:] or "0", 16
        elif len(part) > 1 and part[0] == "0":
            digits, base = part[1:], 8
        else:
            digits, base = part, 10
        try:
            numbers.append(int(digits, base))
        except ValueError:
            return None
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (4 - len(head)):
        return None
    value = last
    for i, n in enumerate(head):
        value += n << (8 * (3 - i))
    return ipaddress.IPv4Address(value)


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address hidden in mapped, compatible, translated, NAT64 and 6to4 forms."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64 or address in _SIIT:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if int(address) >> 32 == 0 and int(address) > 1:  # IPv4-compatible ::a.b.c.d (not :: or ::1)
        return ipaddress.IPv4Address(int(address))
    return None  # Teredo (2001::/32) is not global, so the general rule refuses it


def _resolve(host: str, port: int | None, url: str) -> list[IPAddress]:
    try:
        infos = socket.getaddrinfo(host, port or 443, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise DatasetError(f"URL {url!r}: cannot resolve host {host!r} ({exc})") from None
    addresses = []
    for info in infos:
        try:
            addresses.append(ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]))
        except ValueError:
            raise DatasetError(f"URL {url!r}: host {host!r} resolved to an unreadable address") from None
    if not addresses:
        raise DatasetError(f"URL {url!r}: cannot resolve host {host!r} (no addresses)")
    return addresses


def _describe(address: IPAddress) -> str:
    kinds = [
        ("loopback", address.is_loopback),
        ("unspecified", address.is_unspecified),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("shared (100.64.0.0/10)", address.version == 4 and address in _SHARED),
        ("private", address.is_private),
        ("reserved", address.is_reserved),
    ]
    if address.version == 6 and _embedded_ipv4(address) is not None:  # type: ignore[arg-type]
        return f"the address {address}, which embeds {_describe(_embedded_ipv4(address))}"  # type: ignore[arg-type]
    kind = next((name for name, hit in kinds if hit), "non-public")
    return f"the {kind} address {address}"
