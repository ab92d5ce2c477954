"""`nettop serve --web.config.file`: TLS and basic auth in exporter-toolkit's format.

The end-to-end test has Debian's real Prometheus scrape `nettop serve` over HTTPS
with a password (certificate made here with `openssl req`), and a second job of the
same Prometheus without the password, whose target health must show the 401. The
rest feeds bad files and asks for one line each, and checks a renewed certificate
or a changed password needs no restart.
"""

from __future__ import annotations

import base64
import json
import shutil
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import bcrypt
import pytest

from nettop.serve.webconfig import Gate, WebConfigError, load
from test_serve_prometheus import NETTOP, free_port, stop

PASSWORD = "s3cret scrape"


def make_cert(d: Path, name: str = "server") -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (IP SAN: Go verifies the address against it)."""
    crt, key = d / f"{name}.crt", d / f"{name}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-days", "2", "-subj", "/CN=nettop-test", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(crt)], check=True, capture_output=True, timeout=60)
    return crt, key


def hashed(password: str, cost: int = 10) -> str:
    """As `htpasswd -nBC 10` writes it ($2y$, which Go's and Python's bcrypt both read)."""
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(cost)).decode().replace("$2b$", "$2y$", 1)


def web_config(d: Path, users: dict[str, str] | None = None, tls: bool = True) -> Path:
    """Relative cert_file/key_file: exporter-toolkit resolves them against the file's directory."""
    make_cert(d)
    lines = ["tls_server_config:", "  cert_file: server.crt", "  key_file: server.key"] if tls else []
    if users:
        lines += ["basic_auth_users:"] + [f"  {u}: '{h}'" for u, h in users.items()]
    lines += ["http_server_config:", "  headers:", "    X-Content-Type-Options: nosniff"]
    path = d / "web.yml"
    path.write_text("\n".join(lines) + "\n")
    return path


def fetch(url: str, ca: Path | None, auth: tuple[str, str] | None = None) -> tuple[int, str, dict[str, str]]:
    req = urllib.request.Request(url)
    if auth:
        req.add_header("Authorization", "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode())
    ctx = ssl.create_default_context(cafile=str(ca)) if ca else None
    try:
        with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
            return r.status, r.read().decode(), dict(r.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), dict(exc.headers)


def wait_https(url: str, ca: Path, proc: subprocess.Popen, auth: tuple[str, str] | None) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"nettop serve exited {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
        try:
            if fetch(url, ca, auth)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url} did not answer 200 within 30 s")


@pytest.fixture
def prometheus_bin():
    if shutil.which("prometheus") is None:
        pytest.fail("Debian's prometheus package is missing: ./setup.sh test installs it")
    return shutil.which("prometheus")


def targets(port: int) -> dict[str, dict]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/targets", timeout=5) as r:
        doc = json.loads(r.read())
    return {t["labels"]["job"]: t for t in doc["data"]["activeTargets"]}


@pytest.mark.timeout(180)
def test_prometheus_scrapes_over_tls_with_the_password_and_gets_401_without(tmp_path, prometheus_bin):
    conf_dir = tmp_path / "web"
    conf_dir.mkdir()
    web = web_config(conf_dir, {"prometheus": hashed(PASSWORD)})
    crt = conf_dir / "server.crt"
    nport, pport = free_port(), free_port()
    serve = subprocess.Popen([NETTOP, "serve", "--listen", f"127.0.0.1:{nport}", "-i", "1", "--iface", "lo",
                              "--web.config.file", str(web)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    (tmp_path / "password").write_text(PASSWORD)
    conf = tmp_path / "prometheus.yml"
    job = ("    scheme: https\n    tls_config:\n      ca_file: {ca}\n"
           "    static_configs:\n      - targets: ['127.0.0.1:{port}']\n")
    conf.write_text("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n"
                    "  - job_name: with_password\n    basic_auth:\n      username: prometheus\n"
                    f"      password_file: {tmp_path / 'password'}\n" + job.format(ca=crt, port=nport)
                    + "  - job_name: without_password\n" + job.format(ca=crt, port=nport))
    prom = subprocess.Popen([prometheus_bin, f"--config.file={conf}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{pport}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url = f"https://127.0.0.1:{nport}/metrics"
        wait_https(url, crt, serve, ("prometheus", PASSWORD))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                t = targets(pport)
                if {"with_password", "without_password"} <= set(t) and all(x["health"] != "unknown" for x in t.values()):
                    break
            except OSError:
                pass
            time.sleep(0.5)
        else:
            raise AssertionError(f"Prometheus did not scrape both jobs within 60 s: {prom.stderr}")
        print(f"\nwithout the password, Prometheus says: {t['without_password']['lastError']}")
        assert t["with_password"]["health"] == "up", t["with_password"]
        assert t["with_password"]["scrapeUrl"].startswith("https://")
        assert t["without_password"]["health"] == "down"
        assert "401" in t["without_password"]["lastError"], t["without_password"]
        with urllib.request.urlopen(f"http://127.0.0.1:{pport}/api/v1/query?query=nettop_iface_receive_bytes_total",
                                    timeout=5) as r:
            result = json.loads(r.read())["data"]["result"]
        assert {s["metric"]["job"] for s in result} == {"with_password"}, result
        # and by hand: the password, a wrong one, none; plain HTTP gets no answer
        code, body, headers = fetch(url, crt, ("prometheus", PASSWORD))
        assert code == 200 and "nettop_iface_receive_bytes_total" in body and headers["X-Content-Type-Options"] == "nosniff"
        code, _, headers = fetch(url, crt, ("prometheus", "wrong"))
        assert code == 401 and headers["WWW-Authenticate"] == "Basic"
        assert fetch(url, crt)[0] == 401
        assert fetch(url, crt, ("mallory", PASSWORD))[0] == 401
        with pytest.raises(OSError):
            fetch(f"http://127.0.0.1:{nport}/metrics", None, ("prometheus", PASSWORD))
    finally:
        stop(prom)
        stop(serve)


def test_a_renewed_certificate_and_a_new_password_apply_without_a_restart(tmp_path):
    web = web_config(tmp_path, {"prometheus": hashed("old", 4)})
    port = free_port()
    serve = subprocess.Popen([NETTOP, "serve", "--listen", f"127.0.0.1:{port}", "--iface", "lo",
                              "--web.config.file", str(web)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"https://127.0.0.1:{port}/metrics"
    try:
        wait_https(url, tmp_path / "server.crt", serve, ("prometheus", "old"))
        first = ssl.get_server_certificate(("127.0.0.1", port))
        time.sleep(0.05)  # a distinct mtime
        make_cert(tmp_path)  # renewed in place, as certbot or an ACME client would
        web.write_text(web.read_text().replace(web.read_text().split("prometheus: ")[1].splitlines()[0],
                                               f"'{hashed('new', 4)}'"))
        assert ssl.get_server_certificate(("127.0.0.1", port)) != first
        assert fetch(url, tmp_path / "server.crt", ("prometheus", "new"))[0] == 200
        assert fetch(url, tmp_path / "server.crt", ("prometheus", "old"))[0] == 401
        web.write_text("tls_server_config: [")  # broken: the last good config stays
        assert fetch(url, tmp_path / "server.crt", ("prometheus", "new"))[0] == 200
    finally:
        stop(serve)
    assert "keeping the last good web config" in serve.stderr.read()


BAD = [
    ("tls_server_config: [", "YAML error at line"),
    ("- a\n- b\n", "must be a mapping"),
    ("tls_config:\n  cert_file: x\n", "unknown key tls_config"),
    ("tls_server_config:\n  cert_file: server.crt\n", "needs key_file"),
    ("tls_server_config:\n  key_file: server.key\n", "needs cert_file"),
    ("tls_server_config:\n  cert_file: nothere.crt\n  key_file: server.key\n", "no such file"),
    ("tls_server_config:\n  cert_file: server.key\n  key_file: server.crt\n", "do not load as a PEM pair"),
    ("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  min_version: TLS14\n", "min_version"),
    ("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_auth_type: RequestClientCert\n",
     "Python's ssl cannot"),
    ("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_ca_file: server.crt\n",
     "without client_auth_type"),
    ("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n",
     "not supported"),
    ("tls_server_config:\n  cert_file: 12\n  key_file: server.key\n", "must be a string"),
    ("basic_auth_users:\n  alice: hunter2\n", "not a bcrypt hash"),
    ("basic_auth_users:\n  alice: 12\n", "not a bcrypt hash"),
    ("basic_auth_users: [alice]\n", "must be a mapping"),
    ("http_server_config:\n  headers:\n    X-Frame-Options: allow\n", "deny or sameorigin"),
    ("http_server_config:\n  headers:\n    Server: nginx\n", "not one of"),
    ("http_server_config:\n  http2: maybe\n", "true or false"),
    ("rate_limit:\n  interval: 1s\n  burst: 20\n", "rate_limit is not supported"),
    ("rate_limit: 5\n", "must be a mapping"),
    ("\x00\x01", "YAML error"),
]


def test_an_encrypted_key_is_refused_not_prompted_for(tmp_path):
    crt, key = make_cert(tmp_path)
    subprocess.run(["openssl", "pkey", "-in", str(key), "-aes256", "-passout", "pass:x", "-out", str(tmp_path / "enc.key")],
                   check=True, capture_output=True, timeout=60)
    (tmp_path / "web.yml").write_text("tls_server_config:\n  cert_file: server.crt\n  key_file: enc.key\n")
    with pytest.raises(WebConfigError, match="encrypted"):
        load(tmp_path / "web.yml")


@pytest.mark.parametrize("text, words", BAD)
def test_bad_web_configs_are_one_line(tmp_path, text, words):
    make_cert(tmp_path)
    path = tmp_path / "web.yml"
    path.write_text(text)
    with pytest.raises(WebConfigError) as exc:
        load(path)
    assert words in str(exc.value) and "\n" not in str(exc.value) and str(path) in str(exc.value), str(exc.value)


def test_a_bad_web_config_stops_serve_in_one_line_before_it_binds(tmp_path):
    bad = tmp_path / "web.yml"
    bad.write_text("basic_auth_users:\n  alice: plain\n")
    for path in (bad, tmp_path / "missing.yml", tmp_path):
        p = subprocess.run([NETTOP, "serve", "--listen", "127.0.0.1:9", "--web.config.file", str(path)],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and p.stderr.startswith("nettop serve: "), p.stderr


def test_fuzzed_web_configs_give_a_config_or_one_line(tmp_path):
    """Random mutations of a good file: never a traceback, only WebConfig or WebConfigError."""
    import random

    good = web_config(tmp_path, {"u": hashed("p", 4)}).read_text()
    rng = random.Random(28)
    alphabet = ":-[]{}'\"\n #&*!|>%@`\t\\x0"
    for _ in range(300):
        chars = list(good)
        for _ in range(rng.randint(1, 6)):
            i = rng.randrange(len(chars))
            op = rng.random()
            if op < 0.4:
                chars[i] = rng.choice(alphabet)
            elif op < 0.7:
                del chars[i]
            else:
                chars.insert(i, rng.choice(alphabet))
        (tmp_path / "web.yml").write_text("".join(chars))
        try:
            load(tmp_path / "web.yml")
        except WebConfigError as exc:
            assert "\n" not in str(exc), str(exc)


def test_the_gate_checks_bcrypt_passwords_and_remembers_the_answer(tmp_path):
    web = web_config(tmp_path, {"alice": hashed("right", 4)}, tls=False)
    gate = Gate(load(web))
    assert not gate.tls
    good = "Basic " + base64.b64encode(b"alice:right").decode()
    assert gate.allows(good)
    t = time.perf_counter()
    assert gate.allows(good)
    assert time.perf_counter() - t < 0.002  # remembered, not hashed again
    for bad in (None, "", "Bearer x", "Basic !!!", "Basic " + base64.b64encode(b"alice").decode(),
                "Basic " + base64.b64encode(b"alice:wrong").decode(), "Basic " + base64.b64encode(b"bob:right").decode(),
                "Basic " + base64.b64encode(b"\xff:\xfe").decode()):
        assert not gate.allows(bad), bad
    assert Gate(load(web_config(tmp_path / ".", None, tls=False))).allows(None)  # no users: no password


def test_the_example_in_docs_fleet_md_loads(tmp_path):
    """The web.yml shown to users is a working one (with certificate files beside it)."""
    doc = (Path(__file__).parent.parent / "docs" / "fleet.md").read_text()
    block = doc.split("    # /etc/nettop/web.yml\n", 1)[1].split("\n\n", 1)[0]
    make_cert(tmp_path)
    (tmp_path / "web.yml").write_text("\n".join(line[4:] for line in block.splitlines()) + "\n")
    cfg = load(tmp_path / "web.yml")
    assert cfg.tls is not None and set(cfg.users) == {"prometheus"} and cfg.headers == {"X-Content-Type-Options": "nosniff"}
    assert bcrypt.checkpw(b"change me", cfg.users["prometheus"])


def test_a_disabled_rate_limit_and_http2_are_accepted(tmp_path):
    (tmp_path / "web.yml").write_text("rate_limit:\n  interval: 0\n  burst: 20\nhttp_server_config:\n  http2: false\n")
    cfg = load(tmp_path / "web.yml")
    assert cfg.tls is None and cfg.users == {}


def test_mutual_tls_lets_in_a_client_certificate_signed_by_the_ca_only(tmp_path):
    client_crt, client_key = make_cert(tmp_path, "client")
    make_cert(tmp_path)
    (tmp_path / "web.yml").write_text("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
                                      "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: client.crt\n")
    port = free_port()
    serve = subprocess.Popen([NETTOP, "serve", "--listen", f"127.0.0.1:{port}", "--iface", "lo",
                              "--web.config.file", str(tmp_path / "web.yml")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        ctx = ssl.create_default_context(cafile=str(tmp_path / "server.crt"))
        ctx.load_cert_chain(str(client_crt), str(client_key))
        deadline, code = time.monotonic() + 30, 0
        while time.monotonic() < deadline and code != 200:
            try:
                with urllib.request.urlopen(f"https://127.0.0.1:{port}/metrics", timeout=5, context=ctx) as r:
                    code = r.status
            except OSError:
                time.sleep(0.2)
        assert code == 200
        other_crt, other_key = make_cert(tmp_path, "stranger")
        for cert in (None, (other_crt, other_key)):
            bare = ssl.create_default_context(cafile=str(tmp_path / "server.crt"))
            if cert:
                bare.load_cert_chain(str(cert[0]), str(cert[1]))
            with pytest.raises((ssl.SSLError, OSError)):
                with urllib.request.urlopen(f"https://127.0.0.1:{port}/metrics", timeout=5, context=bare) as r:
                    r.read()
    finally:
        stop(serve)


def test_allow_remote_without_tls_and_a_password_says_so_and_with_them_does_not(tmp_path):
    web = web_config(tmp_path, {"prometheus": hashed(PASSWORD, 4)})
    for extra, warned in (([], True), (["--web.config.file", str(web)], False)):
        port = free_port()
        p = subprocess.Popen([NETTOP, "serve", "--listen", f"127.0.0.1:{port}", "--allow-remote", "--iface", "lo", *extra],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            assert p.stderr is not None
            first = p.stderr.readline()
            if warned:
                assert "clear text" in first and "--web.config.file" in first, first
                first = p.stderr.readline()
            assert first.startswith("nettop: serving " + ("https" if extra else "http") + "://"), first
        finally:
            stop(p)
