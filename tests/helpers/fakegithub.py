"""A fake GitHub REST API on 127.0.0.1 for the PR bot's tests: a real HTTP server in the test
process that keeps pull-request reviews and review comments in memory, records every request,
and can be told to fail chosen requests (403, 422, 5xx)."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeGitHub:
    def __init__(self, repo: str = "octo/proj", number: int = 7, head_sha: str = "0" * 40,
                 base_sha: str = "1" * 40, state: str = "open") -> None:
        self.repo, self.number = repo, number
        self.pr = {"state": state, "head": head_sha, "base": base_sha}
        self.reviews: list[dict[str, Any]] = []
        self.comments: list[dict[str, Any]] = []
        self.requests: list[tuple[str, str, Any]] = []  # (method, path without query, json body)
        self.auth_headers: list[str] = []
        # (METHOD, path regex) -> statuses to answer, consumed one per matching request;
        # "store-then-502" stores a created review, then answers 502; (status, message) sets
        # the error message.
        self.failures: dict[tuple[str, str], list[Any]] = {}
        self._ids = iter(range(1000, 100000))
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    def __enter__(self) -> FakeGitHub:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    # --- helpers for assertions ------------------------------------------------------------
    def writes(self) -> list[tuple[str, str, Any]]:
        return [r for r in self.requests if r[0] != "GET"]

    def fail(self, method: str, path_regex: str, *statuses: Any) -> None:
        self.failures[(method, path_regex)] = list(statuses)

    # --- the API ---------------------------------------------------------------------------
    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _reply(self, status: int, payload: Any = None) -> None:
                data = b"" if payload is None else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self, method: str) -> None:
                path = self.path.split("?", 1)[0]
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                with fake._lock:
                    fake.requests.append((method, path, body))
                    fake.auth_headers.append(self.headers.get("Authorization", ""))
                    for (m, rx), statuses in fake.failures.items():
                        if m == method and re.fullmatch(rx, path) and statuses:
                            status = statuses.pop(0)
                            if status == "store-then-502":
                                fake._route(method, path, body)
                                status = 502
                            messages = {403: "Resource not accessible by integration",
                                        422: "Unprocessable Entity"}
                            message = None
                            if isinstance(status, tuple):
                                status, message = status
                            payload: dict[str, Any] = {"message": message or messages.get(status, "Server Error")}
                            if status == 422:
                                payload["errors"] = ["Line could not be resolved"]
                            return self._reply(status, payload)
                    status, payload = fake._route(method, path, body)
                self._reply(status, payload)

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

            def do_PUT(self) -> None:
                self._handle("PUT")

            def do_PATCH(self) -> None:
                self._handle("PATCH")

            def do_DELETE(self) -> None:
                self._handle("DELETE")

        return Handler

    def _repo_json(self) -> dict[str, Any]:
        owner, name = self.repo.split("/")
        return {"id": 1, "name": name, "full_name": self.repo, "owner": {"login": owner},
                "url": f"{self.url}/repos/{self.repo}"}

    def _pr_json(self) -> dict[str, Any]:
        base = f"{self.url}/repos/{self.repo}/pulls/{self.number}"
        return {"id": 77, "number": self.number, "state": self.pr["state"], "url": base,
                "head": {"sha": self.pr["head"], "ref": "feature"}, "base": {"sha": self.pr["base"], "ref": "main"}}

    def _route(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        repo = f"/repos/{self.repo}"
        pulls = f"{repo}/pulls/{self.number}"
        if method == "GET" and path == repo:
            return 200, self._repo_json()
        if method == "GET" and path == pulls:
            return 200, self._pr_json()
        if method == "GET" and (m := re.fullmatch(rf"{repo}/commits/(\w+)", path)):
            return 200, {"sha": m.group(1), "url": f"{self.url}{path}"}
        if method == "GET" and path == f"{pulls}/reviews":
            return 200, self.reviews
        if method == "GET" and path == f"{pulls}/comments":
            return 200, self.comments
        if method == "POST" and path == f"{pulls}/reviews":
            rid = next(self._ids)
            review = {"id": rid, "body": body.get("body", ""), "state": "COMMENTED",
                      "commit_id": body.get("commit_id"), "user": {"login": "github-actions[bot]"},
                      "url": f"{self.url}{pulls}/reviews/{rid}", "pull_request_url": f"{self.url}{pulls}"}
            self.reviews.append(review)
            for c in body.get("comments", []):
                cid = next(self._ids)
                self.comments.append({
                    "id": cid, "pull_request_review_id": rid, "path": c["path"], "line": c.get("line"),
                    "original_line": c.get("line"), "start_line": c.get("start_line"),
                    "side": c.get("side"), "start_side": c.get("start_side"), "body": c["body"],
                    "commit_id": body.get("commit_id"), "url": f"{self.url}{repo}/pulls/comments/{cid}",
                    "user": {"login": "github-actions[bot]"},
                })
            return 200, review
        if method == "PUT" and (m := re.fullmatch(rf"{pulls}/reviews/(\d+)", path)):
            review = next(r for r in self.reviews if r["id"] == int(m.group(1)))
            review["body"] = body["body"]
            return 200, review
        if m := re.fullmatch(rf"{repo}/pulls/comments/(\d+)", path):
            comment = next((c for c in self.comments if c["id"] == int(m.group(1))), None)
            if comment is None:
                return 404, {"message": "Not Found"}
            if method == "PATCH":
                comment["body"] = body["body"]
                return 200, comment
            if method == "DELETE":
                self.comments.remove(comment)
                return 204, None
        return 404, {"message": f"Not Found: {method} {path}"}

    # --- simulating a push -------------------------------------------------------------------
    def push(self, head_sha: str, moved: dict[int, int | None] | None = None) -> None:
        """A new head; GitHub re-maps existing comments' ``line`` (``None`` = outdated)."""
        self.pr["head"] = head_sha
        for c in self.comments:
            if moved is not None and c["id"] in moved:
                c["line"] = moved[c["id"]]
