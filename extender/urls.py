"""URLs read as Go's net/url reads them: an API server's address, a proxy, a request.

archfit takes these addresses from files and variables written for Go tools (kubeconfig
servers and proxy-urls, HTTPS_PROXY), so they must mean what they mean there: `HTTPS://` is
https, `host:6443` has no scheme, a request URI keeps its `#`, `%zz` is an error. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from extender.errors import ArchfitError

_ALNUM = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_HOST_EXTRA = frozenset(b"!$&'()*+,;=:[]<>\"")
_UNRESERVED_MARKS = frozenset(b"-_.~")
_RESERVED = frozenset(b"$&+,/:;=?@")
_HEX = frozenset(b"0123456789abcdefABCDEF")


class URLError(ArchfitError, ValueError):
    """Go's url.Parse refuses the text."""


def _should_escape(c: int, mode: str) -> bool:
    """net/url's shouldEscape, for the modes archfit needs: host, path, userinfo, fragment."""
    if c >= 0x80:
        return True
    if c in _ALNUM:
        return False
    if mode == "host" and c in _HOST_EXTRA:
        return False
    if c in _UNRESERVED_MARKS:
        return False
    if c in _RESERVED:
        if mode == "path":
            return c == ord("?")
        if mode == "userinfo":
            return c in b"@/?:"
        if mode == "fragment":
            return False
    return not (mode == "fragment" and c in b"!()*")


def _unescape(text: str, mode: str) -> str:
    data = text.encode("utf-8", "surrogateescape")
    out = bytearray()
    index = 0
    while index < len(data):
        c = data[index]
        if c == ord("%"):
            chunk = data[index : index + 3]
            if len(chunk) < 3 or chunk[1] not in _HEX or chunk[2] not in _HEX:
                raise URLError(f'invalid URL escape "{chunk.decode(errors="replace")}"')
            if mode == "host" and int(chunk[1:2], 16) < 8 and chunk != b"%25":
                raise URLError(f'invalid URL escape "{chunk.decode()}"')
            out.append(int(chunk[1:], 16))
            index += 3
            continue
        if mode == "host" and c < 0x80 and _should_escape(c, mode):
            raise URLError(f"invalid character {chr(c)!r} in host name")
        out.append(c)
        index += 1
    return out.decode("utf-8", "surrogateescape")


def _escape(text: str, mode: str) -> str:
    return "".join(
        chr(c) if not _should_escape(c, mode) else f"%{c:02X}"
        for c in text.encode("utf-8", "surrogateescape")
    )


@dataclass(frozen=True, slots=True)
class GoURL:
    """A URL as net/url.URL holds it (the fields archfit reads)."""

    scheme: str = ""
    opaque: str = ""
    username: str | None = None
    password: str | None = None
    host: str = ""
    path: str = ""
    raw_path: str = ""
    raw_query: str = ""
    force_query: bool = False
    fragment: str = ""
    omit_host: bool = False

    @property
    def hostname(self) -> str:
        """The host without its port, IPv6 brackets removed (URL.Hostname)."""
        host, _ = _split_port(self.host)
        return host[1:-1] if host.startswith("[") and host.endswith("]") else host

    @property
    def port(self) -> str:
        return _split_port(self.host)[1]

    def escaped_path(self) -> str:
        if self.raw_path and _valid_encoded(self.raw_path):
            try:
                if _unescape(self.raw_path, "path") == self.path:
                    return self.raw_path
            except URLError:
                pass
        return "*" if self.path == "*" else _escape(self.path, "path")

    def __str__(self) -> str:
        out = []
        if self.scheme:
            out.append(self.scheme + ":")
        if self.opaque:
            out.append(self.opaque)
        else:
            has_user = self.username is not None
            if (self.scheme or self.host or has_user) and not (
                self.omit_host and not self.host and not has_user
            ):
                if self.host or self.path or has_user:
                    out.append("//")
                if has_user:
                    user = _escape(self.username or "", "userinfo")
                    if self.password is not None:
                        user += ":" + _escape(self.password, "userinfo")
                    out.append(user + "@")
                if self.host:
                    out.append(_escape(self.host, "host"))
            path = self.escaped_path()
            if path and not path.startswith("/") and self.host:
                out.append("/")
            if not "".join(out) and ":" in path.split("/", 1)[0]:
                out.append("./")
            out.append(path)
        if self.force_query or self.raw_query:
            out.append("?" + self.raw_query)
        if self.fragment:
            out.append("#" + _escape(self.fragment, "fragment"))
        return "".join(out)

    def without_user(self) -> GoURL:
        return replace(self, username=None, password=None)


def _valid_encoded(text: str) -> bool:
    allowed = frozenset(b"!$&'()*+,;=:@[]%")
    return all(
        c in allowed or not _should_escape(c, "path")
        for c in text.encode("utf-8", "surrogateescape")
    )


def _split_port(host: str) -> tuple[str, str]:
    colon = host.rfind(":")
    if colon != -1 and host.rfind("]") < colon and host[colon + 1 :].isdigit():
        return host[:colon], host[colon + 1 :]
    if colon != -1 and host.rfind("]") < colon and host[colon + 1 :] == "":
        return host[:colon], ""
    return host, ""


def _scheme(raw: str) -> tuple[str, str]:
    for index, char in enumerate(raw):
        if char.isascii() and char.isalpha():
            continue
        if char.isascii() and (char.isdigit() or char in "+-."):
            if index == 0:
                return "", raw
            continue
        if char == ":":
            if index == 0:
                raise URLError("missing protocol scheme")
            return raw[:index], raw[index + 1 :]
        return "", raw
    return "", raw


def _valid_port(port: str) -> bool:
    return port == "" or (port.startswith(":") and all(c in "0123456789" for c in port[1:]))


def _parse_host(scheme: str, host: str) -> str:
    bracket = host.rfind("[")
    if bracket > 0:
        raise URLError("invalid IP-literal")
    if bracket == 0:
        close = host.rfind("]")
        if close < 0:
            raise URLError("missing ']' in host")
        port = host[close + 1 :]
        if not _valid_port(port):
            raise URLError(f"invalid port {port!r} after host")
        inner = _unescape(host[1:close], "host")
        import ipaddress

        try:
            address = ipaddress.ip_address(inner.split("%", 1)[0])
        except ValueError as error:
            raise URLError(f"invalid host: {error}") from error
        if address.version == 4:
            raise URLError("invalid IP-literal")
        return "[" + inner + "]" + port
    first = host.find(":")
    if first != -1:
        last = host.rfind(":")
        # Several colons: http(s) takes the port from the first (Go's urlstrictcolons).
        cut = first if scheme in ("http", "https") else last
        port = host[cut:]
        if not _valid_port(port):
            raise URLError(f"invalid port {port!r} after host")
    return _unescape(host, "host")


def _parse(raw: str, via_request: bool) -> GoURL:
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in raw):
        raise URLError("net/url: invalid control character in URL")
    if raw == "" and via_request:
        raise URLError("empty url")
    if raw == "*":
        return GoURL(path="*")
    scheme, rest = _scheme(raw)
    scheme = scheme.lower()
    force_query, query = False, ""
    if rest.endswith("?") and rest.count("?") == 1:
        force_query, rest = True, rest[:-1]
    else:
        rest, _, query = rest.partition("?")
    if not rest.startswith("/"):
        if scheme:
            return GoURL(scheme=scheme, opaque=rest, raw_query=query, force_query=force_query)
        if via_request:
            raise URLError("invalid URI for request")
        if ":" in rest.split("/", 1)[0]:
            raise URLError("first path segment in URL cannot contain colon")
    username = password = None
    host, omit_host = "", False
    if (scheme or (not via_request and not rest.startswith("///"))) and rest.startswith("//"):
        authority, slash, tail = rest[2:].partition("/")
        rest = slash + tail
        at = authority.rfind("@")
        host = _parse_host(scheme, authority[at + 1 :] if at >= 0 else authority)
        if at >= 0:
            userinfo = authority[:at]
            name, colon, secret = userinfo.partition(":")
            username = _unescape(name, "userinfo")
            password = _unescape(secret, "userinfo") if colon else None
    elif scheme and rest.startswith("/"):
        omit_host = True
    path = _unescape(rest, "path")
    raw_path = "" if _escape(path, "path") == rest else rest
    return GoURL(
        scheme=scheme, username=username, password=password, host=host, path=path,
        raw_path=raw_path, raw_query=query, force_query=force_query, omit_host=omit_host,
    )  # fmt: skip


def parse(raw: str) -> GoURL:
    """url.Parse: a URL or a reference, its `#fragment` split off. Raises URLError."""
    text, hashed, fragment = raw.partition("#")
    found = _parse(text, via_request=False)
    if hashed:
        found = replace(found, fragment=_unescape(fragment, "fragment"))
    return found


def parse_request_uri(raw: str) -> GoURL:
    """url.ParseRequestURI: an absolute URI or path, with no fragment (a `#` stays in it)."""
    return _parse(raw, via_request=True)


def join_host_port(host: str, port: str) -> str:
    """net.JoinHostPort: an IPv6 address is bracketed."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
