"""The web view in a real headless Chromium (Debian's, driven by Playwright): a daemon reading
a slow stdin serves its own view, and ``noveld ui`` serves the view of its state dir beside it
(with a token). The page lists the stories, follows new documents without a reload, shows
hostile document text as text, and the server refuses what a read-only view must."""

from __future__ import annotations

import json
import os
import random
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cli_runner import NOVELD, wait_for_output
from playwright.sync_api import Browser, Page, expect, sync_playwright

from noveld.daemon.cli import main
from noveld.daemon.web.server import ViewServer

pytestmark = pytest.mark.integration

CHROMIUM = "/usr/bin/chromium"  # Debian's package (.ci/run installs it)
TOKEN = "s3cret-token"
HOSTILE_ID = '<img src=x onerror="window.__pwned=1;alert(1)">'
HOSTILE_TEXT = "<script>window.__pwned=2;alert(2)</script>"

STORIES = {
    "volcano": ["volcano", "eruption", "iceland", "lava", "flights", "grounded"],
    "dockers": ["dockers", "strike", "harbour", "wages", "union", "pickets"],
    "comet": ["comet", "telescope", "nebula", "astronomers", "orbit", "sighting"],
}


def story_docs(story: str, n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` short documents of one story (five of its six words each)."""
    rng = random.Random(seed)
    words = STORIES[story]
    return [{"id": f"{story}-{i}", "text": " ".join(rng.sample(words, 5))} for i in range(n)]


def lines(docs: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(d) + "\n" for d in docs).encode()


@dataclass
class Live:
    daemon: subprocess.Popen[bytes]
    daemon_url: str
    ui_url: str
    state_dir: Path


def _url_in(text: str) -> str:
    start = text.index("http://")
    return text[start : text.index("/", start + len("http://"))]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """A daemon on a slow stdin with its own view, and ``noveld ui`` on its state dir."""
    tmp = tmp_path_factory.mktemp("view")
    state = tmp / "state"
    token_file = tmp / "token"
    token_file.write_text(TOKEN + "\n")
    daemon = subprocess.Popen(
        [*NOVELD, "run", "--state-dir", str(state), "--snapshot-interval", "0", "--ui-port", "0"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    ui: subprocess.Popen[bytes] | None = None
    try:
        assert daemon.stdin is not None and daemon.stderr is not None
        said = wait_for_output(daemon.stderr, "web view on http://", 60)
        daemon_url = _url_in(said[said.index("web view on") :])
        # a story of its own whose ids and text are markup (its first document founds it)
        first = [
            {"id": f"{HOSTILE_ID} {i}", "text": f"{HOSTILE_TEXT} quokka marsupial rottnest"}
            for i in range(4)
        ]
        daemon.stdin.write(
            lines(first + story_docs("volcano", 12, 1) + story_docs("dockers", 12, 2))
        )
        daemon.stdin.flush()
        ui = subprocess.Popen(
            [*NOVELD, "ui", "--state-dir", str(state), "--port", "0", "--token-file",
             str(token_file)],
            stderr=subprocess.PIPE,
        )  # fmt: skip
        assert ui.stderr is not None
        said = wait_for_output(ui.stderr, "Ctrl-C stops", 30)
        yield Live(daemon, daemon_url, _url_in(said[said.index(" on http://") :]), state)
    finally:
        if ui is not None:
            ui.terminate()
            assert ui.wait(10) == 0
        if daemon.stdin is not None:
            daemon.stdin.close()
        daemon.wait(60)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    args = ["--no-sandbox"] if os.geteuid() == 0 else []  # chromium's sandbox refuses root
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=args)
        yield b
        b.close()


@dataclass
class Reply:
    headers: Any
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def _get(url: str, method: str = "GET", headers: dict[str, str] | None = None) -> tuple[int, Reply]:
    req = urllib.request.Request(url, method=method, headers=headers or {})
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(req, timeout=10) as r:
            return r.status, Reply(r.headers, r.read())
    except urllib.error.HTTPError as e:
        return e.code, Reply(e.headers, e.read())


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def largest(page: Page) -> Any:
    return page.locator("#largest tbody")


def test_the_daemon_view_lists_the_stories_and_follows_new_documents(
    browser: Browser, live: Live
) -> None:
    page = browser.new_page()
    navigations: list[str] = []
    page.on("framenavigated", lambda f: navigations.append(f.url))
    page.goto(live.daemon_url + "/")
    expect(largest(page)).to_contain_text("volcano", timeout=20_000)
    expect(largest(page)).to_contain_text("dockers")
    expect(page.locator("#status")).to_contain_text("documents")
    assert "comet" not in largest(page).inner_text()
    # the summaries: a growth line per story, documents in the recent window, an example text
    volcano = largest(page).locator("tr", has_text="volcano").first
    expect(volcano.locator("svg.spark polyline")).to_have_count(1)
    expect(page.locator("#recent-head")).to_have_text("last 3 h")
    expect(page.locator("#growth-head")).to_have_text("docs per hour")
    expect(volcano.locator(".exemplar")).to_have_count(1)
    said = volcano.locator(".exemplar").inner_text().split()
    assert len(said) == 5 and set(said) <= set(STORIES["volcano"]), said
    stories = _get(live.daemon_url + "/api/stories")[1].json()["stories"]
    top = next(x for x in stories if x["exemplars"][0]["id"] == "volcano-0")
    assert len(top["sparkline"]) == 24 and top["sparkline"][-1] == top["recent"] >= 12
    assert top["born_at"] and top["last_seen"] and top["exemplars"][0]["text"]
    assert live.daemon.stdin is not None
    live.daemon.stdin.write(lines(story_docs("comet", 15, 3)))
    live.daemon.stdin.flush()
    # the page polls: the new story shows up in both lists, and the count, without a reload
    expect(largest(page)).to_contain_text("comet", timeout=20_000)
    expect(page.locator("#emerging")).to_contain_text("comet", timeout=10_000)
    expect(page.locator("#status [data-key=documents] dd")).to_have_text("43", timeout=10_000)
    assert navigations == [live.daemon_url + "/"], navigations
    page.close()


def test_hostile_document_text_shows_as_text_and_runs_nothing(browser: Browser, live: Live) -> None:
    # the CSP is bypassed so that the page's escaping alone is what is tested
    context = browser.new_context(bypass_csp=True)
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(live.daemon_url + "/")
    expect(page.locator("#emerging")).to_contain_text(HOSTILE_ID, timeout=20_000)
    # the exemplars' text, markup and all, as text beside a growth line
    card = page.locator("#emerging .card", has_text="quokka")
    expect(card.locator(".exemplars")).to_contain_text(f"{HOSTILE_TEXT} quokka marsupial")
    expect(card.locator("svg.spark polyline")).to_have_count(1)
    expect(card.locator(".axis")).to_contain_text("documents per hour, last 24 h")
    assert page.evaluate("() => window.__pwned") is None
    assert page.locator("img").count() == 0 and page.locator("main script").count() == 0
    assert dialogs == []
    context.close()


def test_noveld_ui_beside_the_daemon_needs_its_token(browser: Browser, live: Live) -> None:
    ui = live.ui_url
    for path in ("/", "/api/stories", "/api/births", "/api/status"):
        assert _get(ui + path)[0] == 401, path
        assert _get(ui + path, headers={"Authorization": "Bearer wrong"})[0] == 401, path
        code, r = _get(ui + path, headers={"Authorization": f"Bearer {TOKEN}"})
        assert code == 200, path
    assert _get(ui + "/?token=wrong")[0] == 401
    assert _get(ui + "/static/app.js")[0] == 200  # no data in it
    code, r = _get(ui + f"/?token={TOKEN}")
    assert code == 303 and r.headers["Location"] == "/"
    assert "HttpOnly" in r.headers["Set-Cookie"] and "SameSite=Strict" in r.headers["Set-Cookie"]
    # a browser opens the link once; the cookie carries the token from then on
    page = browser.new_page()
    page.goto(f"{ui}/?token={TOKEN}")
    assert page.url == ui + "/"
    expect(largest(page)).to_contain_text("volcano", timeout=20_000)
    expect(page.locator(".where")).to_contain_text("state-dir")
    expect(page.locator(".where")).to_contain_text("dpmm (hybrid)")  # the engine, its likelihood
    page.reload()
    expect(largest(page)).to_contain_text("dockers", timeout=20_000)
    page.close()


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
def test_a_read_only_view_refuses_other_methods(live: Live, method: str) -> None:
    for url in (live.daemon_url, live.ui_url):
        code, r = _get(url + "/api/stories", method=method)
        assert code == 405 and r.headers["Allow"] == "GET, HEAD", (url, method)
    code, r = _get(live.daemon_url + "/api/stories", method="HEAD")
    assert code == 200 and r.body == b""
    assert "script-src 'self'" in r.headers["Content-Security-Policy"]


class HostileFeed:
    """Every field a feed gives, hostile (the exemplar texts and labels the state will hold)."""

    def stories(self, limit: int) -> list[dict[str, Any]]:
        return [
            {
                "uid": "c1", "size": 9, "recent": 4, "sparkline": [1, 3, 5],
                "born_at": None, "last_seen": None,
                "top_terms": [[HOSTILE_TEXT, 0.5], ["<b>bold</b>", 0.2]],
                "exemplars": [{"id": HOSTILE_ID, "text": HOSTILE_TEXT}],
                "label": "<i onmouseover=alert(3)>label</i>",
            }
        ]  # fmt: skip

    def births(self, limit: int) -> list[dict[str, Any]]:
        return [
            {
                "uid": "c1", "born_at": "2026-01-02T03:04:05Z", "founding_doc_id": HOSTILE_ID,
                "top_terms": [[HOSTILE_TEXT, 0.5]], "size": 9, "live": True,
                "exemplars": [{"id": "d1", "text": HOSTILE_ID}], "label": HOSTILE_TEXT,
                "noticed_at": None,
            }
        ]  # fmt: skip

    def status(self) -> dict[str, Any]:
        return {
            "namespace": HOSTILE_TEXT, "model": "dpmm", "likelihood": HOSTILE_ID,
            "source": "test", "docs": 9,
            "births": 1, "clusters": 1, "docs_per_s": 1.5, "lag_messages": 0,
            "last_commit_age_s": 1.0, "generated_at": "2026-01-02T03:04:05Z",
        }  # fmt: skip


def test_every_field_of_the_feed_is_escaped(browser: Browser) -> None:
    server = ViewServer(HostileFeed(), "127.0.0.1", 0, None).start()
    try:
        context = browser.new_context(bypass_csp=True)
        page = context.new_page()
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(server.url)
        expect(page.locator(".exemplar")).to_contain_text(HOSTILE_TEXT, timeout=10_000)
        body = page.locator("body").inner_text()
        for text in (HOSTILE_ID, HOSTILE_TEXT, "<b>bold</b>", "<i onmouseover=alert(3)>label</i>"):
            assert text in body, text
        page.locator(".label").first.hover()
        assert page.evaluate("() => window.__pwned") is None and dialogs == []
        assert page.locator("img, b, i, main script").count() == 0
        context.close()
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ([], "needs --state-dir DIR or --redis-url URL"),
        (["--state-dir", "/nonexistent/x"], "does not exist"),
        (["--state-dir", "/tmp", "--redis-url", "redis://127.0.0.1:1"], "not both"),
        (["--state-dir", "/tmp", "--token-file", "/nonexistent/t"], "cannot read the view's token"),
        (["--state-dir", "/tmp", "--port", "70000"], "ui.port"),
    ],
)
def test_noveld_ui_refuses_bad_arguments_in_one_line(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ui", *args]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err and len(err.splitlines()) <= 2, err


def test_noveld_ui_shows_a_namespace_in_redis(redis_url: str, tmp_path: Path) -> None:
    docs = tmp_path / "docs.jsonl"
    docs.write_bytes(lines(story_docs("volcano", 10, 1) + story_docs("dockers", 10, 2)))
    run = subprocess.run(
        [*NOVELD, "run", "--input", str(docs), "--redis-url", redis_url, "--namespace", "web",
         "-q"], capture_output=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    ui = subprocess.Popen(
        [*NOVELD, "ui", "--redis-url", redis_url, "--namespace", "web", "--port", "0"],
        stderr=subprocess.PIPE,
    )
    try:
        assert ui.stderr is not None
        said = wait_for_output(ui.stderr, "Ctrl-C stops", 30)
        url = _url_in(said[said.index(" on http://") :])
        code, r = _get(url + "/api/status")
        status = r.json()
        assert code == 200 and status["source"] == "redis" and status["docs"] == 20
        stories = _get(url + "/api/stories")[1].json()["stories"]
        assert len(stories) == status["clusters"] >= 2
        terms = {t for s in stories[:2] for t, _ in s["top_terms"]}
        assert {"volcano", "dockers"} <= terms
        births = _get(url + "/api/births")[1].json()["births"]
        assert {b["uid"] for b in births} >= {s["uid"] for s in stories[:2]}
    finally:
        ui.terminate()
        assert ui.wait(10) == 0
