"""engine/client.py: a request to llama-server waits out its 503 "Loading model" and nothing else."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from strata_bench.engine.client import ServerError, post_json


def _serve(codes: list[int]) -> tuple[HTTPServer, list[int]]:
    """A server answering each POST with the next status of codes (the last one repeats); the statuses
    sent are recorded."""
    sent: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            code = codes[min(len(sent), len(codes) - 1)]
            sent.append(code)
            raw = json.dumps({"status": code}).encode()
            self.send_response(code)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    httpd = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, sent


def _url(httpd: HTTPServer) -> str:
    return f"http://127.0.0.1:{httpd.server_address[1]}/completion"


def test_loading_answers_are_waited_out_until_the_model_answers():
    httpd, sent = _serve([503, 503, 503, 200])
    try:
        assert json.loads(post_json(_url(httpd), b"{}", timeout=10)) == {"status": 200}
    finally:
        httpd.shutdown()
    assert sent == [503, 503, 503, 200]


def test_a_server_still_loading_at_the_time_limit_is_one_line_naming_it():
    httpd, sent = _serve([503])
    try:
        with pytest.raises(ServerError) as err:
            post_json(_url(httpd), b"{}", timeout=0.5)
    finally:
        httpd.shutdown()
    assert str(err.value) == (f"no answer from {_url(httpd)}: HTTP Error 503: Service Unavailable "
                              "(still loading after 0.5 s)")
    assert 2 <= len(sent) <= 6


def test_any_other_error_ends_the_request_at_once():
    httpd, sent = _serve([500, 200])
    try:
        with pytest.raises(ServerError) as err:
            post_json(_url(httpd), b"{}", timeout=10)
    finally:
        httpd.shutdown()
    assert str(err.value) == f"no answer from {_url(httpd)}: HTTP Error 500: Internal Server Error"
    assert sent == [500]
