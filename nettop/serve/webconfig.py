"""`nettop serve --web.config.file FILE`: TLS and basic auth in Prometheus' own format.

The file is the one every Prometheus exporter built on exporter-toolkit reads
(docs/fleet.md shows one), so a fleet's existing certificates, hashes and config
management apply to nettop unchanged:

    tls_server_config: {cert_file: server.crt, key_file: server.key}
    basic_auth_users: {prometheus: $2y$10$...}      # bcrypt hashes, as htpasswd -nBC 10 makes

The semantics follow exporter-toolkit's: unknown keys are errors; relative paths are
relative to the file's directory; no TLS keys means plain HTTP; an empty or missing
basic_auth_users means no password; the file (and the certificate it names) is read
again when it changes, so a renewed certificate or a new user needs no restart (a file
that no longer loads keeps the last good one, said once on stderr). What Python's ssl
cannot express the Go way (cipher suites by Go name, curves, SAN allow-lists, client
certificates requested but not verified, rate limits) is refused in one line rather than
silently ignored.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
import socket
import ssl
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TLS_VERSIONS = {"TLS10": ssl.TLSVersion.TLSv1, "TLS11": ssl.TLSVersion.TLSv1_1,
                "TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}
CLIENT_AUTH = {"": ssl.CERT_NONE, "NoClientCert": ssl.CERT_NONE,
               "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL, "RequireAndVerifyClientCert": ssl.CERT_REQUIRED}
HEADERS = {"Content-Security-Policy": None, "X-Frame-Options": ("deny", "sameorigin"),
           "X-Content-Type-Options": ("nosniff",), "X-XSS-Protection": None, "Strict-Transport-Security": None}
TLS_KEYS = {"cert", "key", "client_ca", "cert_file", "key_file", "client_auth_type", "client_ca_file",
            "min_version", "max_version", "prefer_server_cipher_suites"}
NOT_HERE = {"cipher_suites": "Go's cipher suite names", "curve_preferences": "Go's curve names",
            "client_allowed_sans": "a client SAN allow-list"}
BCRYPT = re.compile(r"^\$2[aby]\$\d\d\$[./A-Za-z0-9]{53}$")
HANDSHAKE_TIMEOUT_S = 10.0


class WebConfigError(Exception):
    """One line naming the file, the key and what to write instead."""


@dataclass(frozen=True, slots=True)
class WebConfig:
    """The parsed file. `tls` None: plain HTTP; `users` empty: no password."""

    path: Path
    tls: ssl.SSLContext | None = None
    users: dict[str, bytes] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    watched: tuple[Path, ...] = ()


def _mapping(value: Any, where: str, path: Path) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise WebConfigError(f"{path}: {where} must be a mapping of names to values")
    return value


def _string(value: Any, where: str, path: Path) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise WebConfigError(f"{path}: {where} must be a string, not {type(value).__name__} {value!r}")
    return value


def _unknown(got: dict[str, Any], known: set[str], where: str, path: Path) -> None:
    extra = sorted(set(got) - known)
    if extra:
        raise WebConfigError(f"{path}: unknown key {where}{extra[0]} (known: {', '.join(sorted(known))})")


def _tls(raw: dict[str, Any], path: Path) -> tuple[ssl.SSLContext | None, tuple[Path, ...]]:
    for key, what in NOT_HERE.items():
        if key in raw:
            raise WebConfigError(f"{path}: tls_server_config.{key} ({what}) is not supported by nettop serve; "
                                 "remove it (Python's defaults for TLS 1.2+ apply)")
    _unknown(raw, TLS_KEYS, "tls_server_config.", path)
    s = {k: _string(raw.get(k), f"tls_server_config.{k}", path) for k in TLS_KEYS - {"prefer_server_cipher_suites"}}
    if not any(s[k] for k in ("cert", "key", "cert_file", "key_file", "client_ca", "client_ca_file", "client_auth_type")):
        return None, ()
    if not (s["cert"] or s["cert_file"]):
        raise WebConfigError(f"{path}: tls_server_config needs cert_file (or cert) as well as the key")
    if not (s["key"] or s["key_file"]):
        raise WebConfigError(f"{path}: tls_server_config needs key_file (or key) as well as the certificate")
    auth = s["client_auth_type"]
    if auth not in CLIENT_AUTH:
        why = ("requests a client certificate without verifying it, which Python's ssl cannot do"
               if auth in ("RequestClientCert", "RequireAnyClientCert", "RequireClientCert") else "is not a client_auth_type")
        raise WebConfigError(f"{path}: tls_server_config.client_auth_type {auth!r} {why}; "
                             "use NoClientCert, VerifyClientCertIfGiven or RequireAndVerifyClientCert")
    has_ca = bool(s["client_ca"] or s["client_ca_file"])
    if has_ca and CLIENT_AUTH[auth] == ssl.CERT_NONE:
        raise WebConfigError(f"{path}: a client CA is set without client_auth_type; "
                             "add client_auth_type: RequireAndVerifyClientCert")
    if CLIENT_AUTH[auth] != ssl.CERT_NONE and not has_ca:
        raise WebConfigError(f"{path}: client_auth_type {auth} needs client_ca_file to verify clients against")
    versions = []
    for key, default in (("min_version", "TLS12"), ("max_version", "TLS13")):
        name = s[key] or default
        if name not in TLS_VERSIONS:
            raise WebConfigError(f"{path}: tls_server_config.{key} {name!r}: use one of {', '.join(TLS_VERSIONS)}")
        versions.append(TLS_VERSIONS[name])
    prefer = raw.get("prefer_server_cipher_suites", True)
    if not isinstance(prefer, bool):
        raise WebConfigError(f"{path}: tls_server_config.prefer_server_cipher_suites must be true or false")
    base = path.parent
    files = {k: base / s[k] for k in ("cert_file", "key_file", "client_ca_file") if s[k]}
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        ctx.minimum_version, ctx.maximum_version = versions
    except ValueError as exc:
        raise WebConfigError(f"{path}: min_version/max_version: {exc}") from None
    if prefer:
        ctx.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    _load_pair(ctx, files.get("cert_file"), s["cert"], files.get("key_file"), s["key"], path)
    ctx.verify_mode = CLIENT_AUTH[auth]
    if has_ca:
        try:
            if "client_ca_file" in files:
                ctx.load_verify_locations(cafile=str(files["client_ca_file"]))
            else:
                ctx.load_verify_locations(cadata=s["client_ca"])
        except (OSError, ssl.SSLError) as exc:
            raise WebConfigError(f"{path}: client CA: {_why(exc)}") from None
    return ctx, tuple(files.values())


def _why(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError):
        return exc.reason or str(exc).splitlines()[0]
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}" + (f": {exc.filename}" if exc.filename else "")
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _encrypted(path: Path) -> Any:
    """ssl's callback for an encrypted key: refuse, rather than prompt on the terminal at start."""
    def refuse() -> bytes:
        raise WebConfigError(f"{path}: the TLS key is encrypted; give an unencrypted key (readable by root only)")
    return refuse


def _load_pair(ctx: ssl.SSLContext, cert_file: Path | None, cert: str, key_file: Path | None, key: str,
               path: Path) -> None:
    """ssl loads a key pair from files only: inline PEM goes through a private temporary directory."""
    for name, f in (("cert_file", cert_file), ("key_file", key_file)):
        if f is not None and not f.is_file():
            raise WebConfigError(f"{path}: tls_server_config.{name} {f}: no such file")
    with tempfile.TemporaryDirectory(prefix="nettop-tls-") as tmp:
        if cert_file is None:
            cert_file = Path(tmp, "cert.pem")
            cert_file.write_text(cert)
        if key_file is None:
            key_file = Path(tmp, "key.pem")
            fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(key)
        try:
            ctx.load_cert_chain(str(cert_file), str(key_file), password=_encrypted(path))
        except (OSError, ssl.SSLError) as exc:
            raise WebConfigError(f"{path}: the certificate and key do not load as a PEM pair: {_why(exc)}") from None


def _users(raw: dict[str, Any], path: Path) -> dict[str, bytes]:
    users: dict[str, bytes] = {}
    for name, hashed in raw.items():
        if not isinstance(hashed, str) or not BCRYPT.match(hashed):
            raise WebConfigError(f"{path}: basic_auth_users.{name}: not a bcrypt hash; make one with "
                                 "`htpasswd -nBC 10 \"\" | tr -d ':\\n'`")
        users[name] = hashed.encode()
    return users


def _headers(raw: dict[str, Any], path: Path) -> dict[str, str]:
    out = {}
    for name, value in raw.items():
        if name not in HEADERS:
            raise WebConfigError(f"{path}: http_server_config.headers.{name}: not one of {', '.join(HEADERS)}")
        text = _string(value, f"http_server_config.headers.{name}", path)
        allowed = HEADERS[name]
        if allowed is not None and text and text.lower() not in allowed:
            raise WebConfigError(f"{path}: http_server_config.headers.{name} {text!r}: use {' or '.join(allowed)}")
        if "\n" in text or "\r" in text:
            raise WebConfigError(f"{path}: http_server_config.headers.{name} holds a line break")
        if text:
            out[name] = text
    return out


def load(path: str | Path) -> WebConfig:
    """Parse and check the file, certificates and hashes included; WebConfigError otherwise."""
    import yaml

    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise WebConfigError(f"--web.config.file {p}: {_why(exc)}") from None
    except UnicodeDecodeError:
        raise WebConfigError(f"{p}: not a text file (give a YAML web config)") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not YAML"
        raise WebConfigError(f"{p}: YAML error{where}: {problem}") from None
    top = _mapping(doc, "the file", p)
    _unknown(top, {"tls_server_config", "http_server_config", "basic_auth_users", "rate_limit"}, "", p)
    limit = _mapping(top.get("rate_limit"), "rate_limit", p)
    if str(limit.get("interval", 0)).strip() not in ("0", "0s", ""):
        raise WebConfigError(f"{p}: rate_limit is not supported by nettop serve (a scrape costs one cached "
                             "render); remove it or set its interval to 0")
    http = _mapping(top.get("http_server_config"), "http_server_config", p)
    _unknown(http, {"http2", "headers"}, "http_server_config.", p)
    if not isinstance(http.get("http2", True), bool):
        raise WebConfigError(f"{p}: http_server_config.http2 must be true or false")
    tls, files = _tls(_mapping(top.get("tls_server_config"), "tls_server_config", p), p)
    return WebConfig(p, tls, _users(_mapping(top.get("basic_auth_users"), "basic_auth_users", p), p),
                     _headers(_mapping(http.get("headers"), "http_server_config.headers", p), p), (p, *files))


def _stamp(paths: tuple[Path, ...]) -> tuple[tuple[int, int], ...]:
    out = []
    for f in paths:
        try:
            st = f.stat()
            out.append((st.st_mtime_ns, st.st_size))
        except OSError:
            out.append((0, -1))
    return tuple(out)


class Gate:
    """What every connection and request passes: the TLS handshake and the password.

    Holds the last good WebConfig, re-read when the file or a file it names changes.
    Checked passwords are remembered (a digest of them, per config), so a scrape every
    second costs one bcrypt per user and password, not one per scrape."""

    def __init__(self, config: WebConfig) -> None:
        self._config = config
        self._stamp = _stamp(config.watched)
        self._lock = threading.Lock()
        self._ok: dict[bytes, bool] = {}
        self._said: str | None = None
        self._decoy_hash: bytes | None = None

    def _decoy(self) -> bytes:
        import bcrypt

        if self._decoy_hash is None:
            self._decoy_hash = bcrypt.hashpw(os.urandom(16).hex().encode(), bcrypt.gensalt(10))
        return self._decoy_hash

    @property
    def tls(self) -> bool:
        """Fixed for the life of the server: the scheme Prometheus scrapes must not change."""
        return self._config.tls is not None

    def config(self) -> WebConfig:
        with self._lock:
            stamp = _stamp(self._config.watched)
            if stamp == self._stamp:
                return self._config
            self._stamp = stamp
            try:
                new = load(self._config.path)
            except WebConfigError as exc:
                if str(exc) != self._said:
                    print(f"nettop serve: {exc}; keeping the last good web config", file=sys.stderr, flush=True)
                    self._said = str(exc)
                return self._config
            if (new.tls is None) != (self._config.tls is None):
                print(f"nettop serve: {new.path}: TLS cannot be turned on or off while serving; restart nettop serve",
                      file=sys.stderr, flush=True)
                return self._config
            self._config, self._ok, self._said = new, {}, None
            self._stamp = _stamp(new.watched)
            return new

    def wrap(self, conn: socket.socket) -> socket.socket | None:
        """The TLS side of an accepted connection (None: the handshake failed; it is closed)."""
        ctx = self.config().tls
        if ctx is None:
            return conn
        conn.settimeout(HANDSHAKE_TIMEOUT_S)
        try:
            return ctx.wrap_socket(conn, server_side=True)
        except (OSError, ValueError):
            conn.close()
            return None

    def allows(self, authorization: str | None) -> bool:
        """Whether a request with this Authorization header may read /metrics."""
        import bcrypt

        users = self.config().users
        if not users:
            return True
        scheme, _, encoded = (authorization or "").partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            user, sep, password = base64.b64decode(encoded.strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        if not sep:
            return False
        hashed = users.get(user)
        key = hashlib.sha256(f"{user}\0{password}".encode() + (hashed or b"")).digest()
        with self._lock:
            known = self._ok.get(key)
        if known is not None:
            return known
        # an unknown user costs a bcrypt too, so timing does not tell which names exist
        probe = hashed or self._decoy()
        try:
            ok = bcrypt.checkpw(password.encode(), probe) and hashed is not None
        except ValueError:
            ok = False
        with self._lock:
            if len(self._ok) > 1024:
                self._ok.clear()
            self._ok[key] = ok
        return ok
