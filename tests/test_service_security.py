"""Sessions and CSRF on a real server: the login cookie is a server-side session id (never the token), only
read and admin tokens may log in, the cookie opens no /api route, a cross-site form post or push is refused,
logout is a POST that ends the session, every answer carries the security headers, --public-read shows
results and reports only, over TLS the cookie is __Host- and Secure, and a non-loopback --host without TLS or a
proxy warns. Sessions are rows in the database: SQLite and PostgreSQL."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pytest
from service_fixtures import create_token, new_database, running_server

from accelbench.service.server import exposure_warning

pytestmark = pytest.mark.slow
DATA = Path(__file__).parent / "data" / "reports" / "cpu-local"
SPEC = 'name = "x"\n[[models]]\nuri = "builtin:identity"\nprecisions = ["fp32"]\n[[targets]]\nid = "cpu-local"\nmode = "local"\n'
HTML = {"Accept": "text/html"}


def _login(base: str, token: str, **kwargs) -> tuple[httpx.Client, httpx.Response]:
    client = httpx.Client(base_url=base, timeout=120, **kwargs)
    return client, client.post("/login", data={"token": token})


def test_the_cookie_is_a_session_id_and_only_read_or_admin_tokens_log_in(live_server):
    base = live_server.base_url
    browser, ok = _login(base, live_server.token)
    cookie = ok.headers["set-cookie"]
    assert ok.status_code == 303 and cookie.startswith("accelbench_session=abs_"), cookie
    assert live_server.token not in cookie
    for attribute in ("HttpOnly", "SameSite=strict", "Max-Age=43200", "Path=/"):
        assert attribute.lower() in cookie.lower(), cookie
    assert browser.get("/", headers=HTML).status_code == 200
    for scope in ("runner", "push"):
        machine, refused = _login(base, create_token(live_server.db_url, scope, f"login-{scope}"))
        assert refused.status_code == 403 and "not for the pages" in refused.text
        assert "set-cookie" not in refused.headers
        machine.close()
    reader, fine = _login(base, create_token(live_server.db_url, "read", "login-read"))
    assert fine.status_code == 303
    reader.close()
    # the cookie is for the pages only: no /api route takes it
    for path in ("/api/v1/results", "/api/v1/campaigns", "/api/v1/report"):
        assert browser.get(path).status_code == 401, path
    raw = (DATA / "resnet50__cpu-local__fp32__closed-http-b1.json").read_bytes()
    push = browser.post("/api/v1/results", content=raw, headers={"Content-Type": "text/plain"})
    assert push.status_code == 401  # the cookie does not push
    browser.close()


def test_cross_site_posts_are_refused_and_logout_is_a_post_that_ends_the_session(live_server):
    base = live_server.base_url
    browser, _ = _login(base, live_server.token)
    form = {"spec": SPEC, "lease_s": "60", "max_attempts": "1"}
    foreign = browser.post("/campaigns", data=form, headers={"Origin": "https://evil.example"})
    assert foreign.status_code == 403 and "Origin is another site" in foreign.text
    fetch = browser.post("/campaigns", data=form, headers={"Sec-Fetch-Site": "cross-site"})
    assert fetch.status_code == 403
    opaque = browser.post("/campaigns", data=form, headers={"Origin": "null"})
    assert opaque.status_code == 403
    own = browser.post("/campaigns", data=form, headers={"Origin": base, "Sec-Fetch-Site": "same-origin"})
    assert own.status_code == 303  # the same form from the server's own page goes through
    assert browser.get("/logout").status_code == 405
    sid = browser.cookies["accelbench_session"]
    assert browser.post("/logout", headers={"Origin": base}).status_code == 303
    replayed = httpx.get(base + "/", headers=HTML, cookies={"accelbench_session": sid}, timeout=60)
    assert replayed.status_code == 303 and replayed.headers["location"] == "/login"  # ended on the server
    browser.close()


def test_every_answer_carries_the_security_headers(live_server):
    auth = {"Authorization": f"Bearer {live_server.token}"}
    for path, headers in (("/login", {}), ("/", auth), ("/api/v1/health", {}), ("/api/v1/results", auth)):
        r = httpx.get(live_server.base_url + path, headers=headers, timeout=60)
        assert r.headers["x-frame-options"] == "DENY" and r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["referrer-policy"] == "same-origin"
        csp = r.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp and "script-src" not in csp


def test_public_read_shows_results_and_reports_only(request, tmp_path):
    with running_server(new_database("sqlite", request, tmp_path), tmp_path, "--public-read") as server:
        auth = {"Authorization": f"Bearer {server.token}"}
        raw = (DATA / "resnet50__cpu-local__fp32__closed-http-b1.json").read_bytes()
        assert (
            httpx.post(
                server.base_url + "/api/v1/results", content=raw, headers=auth, timeout=120
            ).status_code
            == 201
        )
        for path in ("/api/v1/results", "/api/v1/report?model=resnet50", "/"):
            assert httpx.get(server.base_url + path, timeout=120).status_code == 200, path
        for path in (
            "/api/v1/campaigns",
            "/api/v1/runners",
            "/api/v1/jobs/1/documents",
            "/campaigns",
            "/runners",
        ):
            assert httpx.get(server.base_url + path, timeout=60).status_code == 401, path
            assert httpx.get(server.base_url + path, headers=auth, timeout=60).status_code in (200, 404), path


def test_over_tls_the_cookie_is_host_prefixed_and_secure(request, tmp_path):
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=127.0.0.1"], check=True, capture_output=True)  # fmt: skip
    db = new_database("sqlite", request, tmp_path)
    token = create_token(db)
    from service_fixtures import _free_port

    port = _free_port()
    log = tmp_path / "tls.log"
    from campaign_helpers import start_server_on, stop_server

    proc = start_server_on(db, port, log, "--ssl-certfile", str(cert), "--ssl-keyfile", str(key))
    try:
        base = f"https://127.0.0.1:{port}"
        import time

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(base + "/api/v1/health", verify=False, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        browser, ok = _login(base, token, verify=False)
        cookie = ok.headers["set-cookie"]
        assert cookie.startswith("__Host-accelbench_session=abs_") and "secure" in cookie.lower(), cookie
        assert "domain" not in cookie.lower()
        assert ok.headers["strict-transport-security"].startswith("max-age=")
        sid = browser.cookies["__Host-accelbench_session"]
        html = {"Accept": "text/html"}
        own = httpx.get(base + "/", headers=html, cookies={"__Host-accelbench_session": sid}, verify=False)
        assert own.status_code == 200
        # the plain cookie over TLS: what any plain-HTTP page of the domain could have planted
        plain = httpx.get(base + "/", headers=html, cookies={"accelbench_session": sid}, verify=False)
        assert plain.status_code == 303 and plain.headers["location"] == "/login"
        browser.close()
        assert "warning" not in log.read_text()
    finally:
        stop_server(proc)


@pytest.mark.parametrize(
    "host,tls,proxy,warns",
    [("127.0.0.1", False, False, False), ("::1", False, False, False), ("0.0.0.0", False, False, True),
     ("192.168.1.5", False, False, True), ("0.0.0.0", True, False, False), ("0.0.0.0", False, True, False)],
)  # fmt: skip
def test_a_host_beyond_loopback_without_tls_or_a_proxy_warns_in_one_line(host, tls, proxy, warns):
    line = exposure_warning(host, tls, proxy)
    assert (line is not None) == warns
    if line:
        assert "\n" not in line and "--behind-proxy" in line and "--ssl-certfile" in line
