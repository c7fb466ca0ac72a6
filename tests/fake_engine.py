"""A fake inference engine for the command A/B tests (no GPU): it prints what a real engine prints.

    python tests/fake_engine.py run --prompts 128,512 --decode 64
        prefill 128 tokens in 12.800 ms
        prefill 512 tokens in 51.200 ms
        logits sha256 128: <hex>
        decode 64 tokens in 640.000 ms: 100.0 tokens/s
        decode sha256: <hex>
    python tests/fake_engine.py serve --port P     a server: prints "listening on port P" when ready,
                                                   starts a worker child, answers clients, prints the
                                                   prefill lines of each request on its own output
    python tests/fake_engine.py client --port P --prompts 128,512    one request; prints decode tok/s

Switches (environment): FAKE_SLOWER_PCT=3 makes every timing 3% longer; FAKE_HASH=x changes the
logits hash; FAKE_NOISE_PCT (default 0.1) is the sd of a per-run jitter; FAKE_READY_DELAY (s) delays
the server's ready line; FAKE_SERVER_DIE=1 makes the server exit before it is ready; FAKE_HANG=1
(or --hang) makes `run` start a child and sleep, and `client` sleep after its answer; FAKE_PIDS_FILE=F
appends "pid child_pid" lines to F (a client: "pid").
"""
from __future__ import annotations

import argparse
import hashlib
import os
import random
import socket
import subprocess
import sys
import time


def _factor() -> float:
    jitter = random.Random().gauss(0, float(os.environ.get("FAKE_NOISE_PCT", "0.1")) / 100)
    return (1 + float(os.environ.get("FAKE_SLOWER_PCT", "0")) / 100) * (1 + jitter)


def _lines(prompts: list[int], decode: int) -> tuple[list[str], str]:
    f = _factor()
    out = [f"prefill {n} tokens in {n * 0.1 * f:.3f} ms" for n in prompts]
    salt = os.environ.get("FAKE_HASH", "")
    out += [f"logits sha256 {n}: {hashlib.sha256(f'{n}{salt}'.encode()).hexdigest()[:16]}" for n in prompts]
    decode_ms = decode * 10.0 * f
    tail = f"decode {decode} tokens in {decode_ms:.3f} ms: {decode / (decode_ms / 1e3):.2f} tokens/s"
    return out, tail


def _decode_hash(decode: int) -> str:
    salt = os.environ.get("FAKE_HASH", "")
    return f"decode sha256: {hashlib.sha256(f'decode{decode}{salt}'.encode()).hexdigest()[:16]}"


def _note_pids(*pids: int) -> None:
    if os.environ.get("FAKE_PIDS_FILE"):  # so a test can check that nothing is left behind
        with open(os.environ["FAKE_PIDS_FILE"], "a") as f:
            f.write(" ".join(map(str, pids)) + "\n")


def run(args) -> None:
    if args.hang:  # a run that hangs with a child: for timeouts and SIGTERM
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        _note_pids(os.getpid(), child.pid)
        time.sleep(600)
    lines, tail = _lines(args.prompts, args.decode)
    print("\n".join(lines + [tail, _decode_hash(args.decode)]), flush=True)


def serve(args) -> None:
    if os.environ.get("FAKE_SERVER_DIE"):  # the error, then what a real server prints on its way out
        print("loading model... out of memory\nfreeing buffers\nshutting down", flush=True)
        sys.exit(3)
    # A worker child, as real servers have: stopping the server must stop it too.
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    _note_pids(os.getpid(), worker.pid)
    time.sleep(float(os.environ.get("FAKE_READY_DELAY", "0")))
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen()
    print(f"listening on port {args.port}", flush=True)
    while True:
        conn, _ = sock.accept()
        with conn:
            request = conn.recv(1024).decode().split()
            if not request:  # a readiness probe connects and says nothing
                continue
            prompts, decode = [int(p) for p in request[0].split(",")], int(request[1])
            lines, tail = _lines(prompts, decode)
            print("\n".join(lines), flush=True)
            conn.sendall(tail.encode())


def client(args) -> None:
    with socket.create_connection(("127.0.0.1", args.port), timeout=10) as conn:
        conn.sendall(f"{','.join(map(str, args.prompts))} {args.decode}".encode())
        print(conn.recv(1024).decode(), flush=True)
    if args.hang:  # a client still running when the test kills `ab`
        _note_pids(os.getpid())
        time.sleep(600)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("run", "serve", "client"))
    # --tokens and --layers as `strata-bench workload` spells them, so its command lines run here as they are
    parser.add_argument("--prompts", "--tokens", type=lambda s: [int(x) for x in s.split(",")], default=[128, 512])
    parser.add_argument("--decode", type=int, default=64)
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--hang", action="store_true", default=bool(os.environ.get("FAKE_HANG")))
    args = parser.parse_args()
    {"run": run, "serve": serve, "client": client}[args.mode](args)


if __name__ == "__main__":
    main()
