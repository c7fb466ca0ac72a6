"""A fake llama.cpp for the engine A/B tests on the CPU: it prints what llama-bench, llama-perplexity and
llama-server print (formats from llama.cpp's tools/; the numbers are made up). The file name starts with
`llama-` so `ab`'s model check treats its command lines as llama.cpp's.

    python llama-fake.py bench -m M.gguf -p 512,1024 -n 128 -o json|jsonl|md   llama-bench
    python llama-fake.py perplexity -m M.gguf -f T --kl-divergence-base F [--kl-divergence] [--chunks N]
    python llama-fake.py server -m M.gguf --port P                                llama-server (/completion)
    python llama-fake.py quantize [--allow-requantize] [--imatrix F] IN OUT TYPE  llama-quantize (copies IN)
    python llama-fake.py imatrix -m M.gguf -f TEXT -o OUT                         llama-imatrix
Options the fakes do not know (-ngl 99, -c 128) are accepted and ignored.

Switches (environment): FAKE_TG_SLOWER_PCT=3 makes generation 3% slower (a planted mul_mat_vec_q
slowdown; prompt processing unchanged); FAKE_NOISE_PCT (default 0.2) is the sd of a per-run jitter;
FAKE_ULP=1 changes the logits by one step (a one-ulp change in a dot): the tokens from the 5th on and the
log-probabilities differ. The server answers 503 "Loading model" for its first FAKE_LOAD_S seconds (default
0.3), after its port already listens, as llama-server does while it loads the model.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

LOG = ("ggml_cuda_init: found 1 CUDA devices:\n"
       "  Device 0: NVIDIA H200, compute capability 9.0, VMM: yes\n")


def _jitter() -> float:
    return 1 + random.Random().gauss(0, float(os.environ.get("FAKE_NOISE_PCT", "0.2")) / 100)


def _test(model: str, n_prompt: int, n_gen: int, reps: int) -> dict:
    slower = 1 + float(os.environ.get("FAKE_TG_SLOWER_PCT", "0")) / 100 if n_gen else 1.0
    rate = (20000.0 if n_prompt else 400.0) / slower
    samples_ts = [round(rate * _jitter(), 6) for _ in range(reps)]
    samples_ns = [int(1e9 * (n_prompt + n_gen) / t) for t in samples_ts]
    mean = sum(samples_ts) / reps
    return {"build_commit": "0c1e5709", "build_number": 6600, "cpu_info": "Fake CPU", "gpu_info": "NVIDIA H200",
            "backends": "CUDA", "model_filename": model, "model_type": "gemma3 270M Q4_K - Medium",
            "model_size": 253113024, "model_n_params": 268098176, "n_batch": 2048, "n_ubatch": 512,
            "n_threads": 16, "n_gpu_layers": 99, "n_prompt": n_prompt, "n_gen": n_gen, "n_depth": 0,
            "test_time": "2026-12-02T10:00:00Z", "avg_ns": sum(samples_ns) // reps, "stddev_ns": 0,
            "avg_ts": round(mean, 6), "stddev_ts": 0.0, "samples_ns": samples_ns, "samples_ts": samples_ts}


def bench(args) -> None:
    sys.stderr.write(LOG)
    tests = [(int(p), 0) for p in args.p.split(",") if int(p)] + [(0, int(n)) for n in args.n.split(",") if int(n)]
    objects = [_test(args.m, p, n, args.r) for p, n in tests]
    if args.o == "json":
        print(json.dumps(objects, indent=2))
    elif args.o == "jsonl":
        for obj in objects:
            print(json.dumps(obj))
    else:
        for obj in objects:
            name = f"pp{obj['n_prompt']}" if obj["n_prompt"] else f"tg{obj['n_gen']}"
            print(f"| {obj['model_type']} | CUDA | 99 | {name} | {obj['avg_ts']:.2f} ± 0.00 |")


def _logits() -> bytes:
    return b"_logits_" + hashlib.sha256(f"logits{os.environ.get('FAKE_ULP', '')}".encode()).digest() * 64


def perplexity(args) -> None:
    sys.stderr.write(LOG)
    if not args.kl_divergence:
        with open(args.kl_divergence_base, "wb") as f:
            f.write(_logits())
        print("Final estimate: PPL = 21.4031 +/- 0.53377")
        return
    with open(args.kl_divergence_base, "rb") as f:
        same = f.read() == _logits()
    kld, top = (0.0, 100.0) if same else (0.000412, 99.216)
    print("chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              Δp RMS"
          "            Same top p")
    for chunk in range(1, args.chunks + 1):
        print(f"{chunk:4d}    {21.4 + chunk / 100:9.4f} ± {0.5:9.4f}    {0.0:10.5f} ± {0.0:10.5f}    "
              f"{kld:10.5f} ± {kld / 10:10.5f}    {0.0 if same else 0.83:6.3f} ± {0.01:6.3f} %    "
              f"{top:6.3f} ± {0.0 if same else 0.35:6.3f} %")
    if args.chunks * 63 >= 100:  # llama-perplexity prints its summary over 100 or more scored tokens
        print("\n====== Perplexity statistics ======")
        print(f"Mean PPL(Q)                   : {21.45:10.6f} ± {0.53:10.6f}")
        print("\n====== KL divergence statistics ======")
        print(f"Mean    KLD: {kld:10.6f} ± {kld / 10:10.6f}")
        print(f"Maximum KLD: {kld * 40:10.6f}")
        print("\n====== Token probability statistics ======")
        print(f"Same top p: {top:6.3f} ± {0.0 if same else 0.35:5.3f} %")


def _tokens(prompt: str, n: int) -> list[int]:
    ids = [int(hashlib.sha256(f"{prompt}{i}".encode()).hexdigest()[:5], 16) for i in range(n)]
    if os.environ.get("FAKE_ULP"):
        ids[4:] = [t + 1 for t in ids[4:]]  # greedy decoding diverges once a top-1 flips
    return ids


LOADED_AT = 0.0  # server: when the "model" is loaded (time.monotonic)


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def _send(self, code: int, body: dict) -> None:
        raw = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_GET(self) -> None:
        self._send(200, {"status": "ok"})

    def do_POST(self) -> None:
        if time.monotonic() < LOADED_AT:  # llama-server listens before its model is loaded, and says so
            self._send(503, {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}})
            return
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        n = int(req.get("n_predict", 16))
        ids = _tokens(req["prompt"], n)
        rate = 400.0 / (1 + float(os.environ.get("FAKE_TG_SLOWER_PCT", "0")) / 100) * _jitter()
        self._send(200, {"content": " ".join(f"t{i}" for i in ids), "tokens": ids if req.get("return_tokens") else [],
                         "timings": {"prompt_n": len(req["prompt"].split()), "prompt_per_second": 20000.0 * _jitter(),
                                     "predicted_n": n, "predicted_per_second": rate}})


def quantize(args) -> None:
    with open(args.inp, "rb") as f, open(args.out, "wb") as g:
        g.write(f.read())
    print(f"llama_model_quantize_impl: model size = 241.41 MiB -> {args.type}")


def imatrix(args) -> None:
    with open(args.o, "wb") as f:
        f.write(b"imatrix from " + args.f.encode())
    print(f"save_imatrix: stored collected data after 4 chunks in {args.o}")


def server(args) -> None:
    global LOADED_AT
    LOADED_AT = time.monotonic() + float(os.environ.get("FAKE_LOAD_S", "0.3"))
    httpd = HTTPServer(("127.0.0.1", args.port), _Handler)
    print(f"main: server is listening on http://127.0.0.1:{args.port} - starting the main loop", flush=True)
    httpd.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="tool", required=True)
    b = sub.add_parser("bench")
    b.add_argument("-m", required=True)
    b.add_argument("-p", default="512")
    b.add_argument("-n", default="128")
    b.add_argument("-r", type=int, default=5)
    b.add_argument("-o", default="md")
    b.add_argument("-ngl")  # known, so that argparse does not read it as -n gl
    p = sub.add_parser("perplexity")
    p.add_argument("-m", required=True)
    p.add_argument("-f", required=True)
    p.add_argument("--kl-divergence-base", required=True)
    p.add_argument("--kl-divergence", action="store_true")
    p.add_argument("--chunks", type=int, default=4)
    s = sub.add_parser("server")
    s.add_argument("-m", required=True)
    s.add_argument("--port", type=int, required=True)
    q = sub.add_parser("quantize")
    q.add_argument("--allow-requantize", action="store_true")
    q.add_argument("--imatrix")
    q.add_argument("inp")
    q.add_argument("out")
    q.add_argument("type")
    i = sub.add_parser("imatrix")
    i.add_argument("-m", required=True)
    i.add_argument("-f", required=True)
    i.add_argument("-o", required=True)
    args, _ = parser.parse_known_args()
    {"bench": bench, "perplexity": perplexity, "server": server, "quantize": quantize, "imatrix": imatrix}[args.tool](args)


if __name__ == "__main__":
    main()
