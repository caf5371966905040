"""Client CPU per request of the HTTP clients the load generator could use, on the same pre-built request.

One gevent process (as in a Locust load process) sends the same binary-tensor request to builtin:identity
on the local Triton, one request in flight, with: accelbench's keep-alive socket client
(``accelbench.loadtests.clients.HttpClient``, what the users run), geventhttpclient's ``HTTPClient`` (what
Locust's FastHttpUser and tritonclient.http use), and tritonclient.http's ``infer`` (the previous request
path, which also encodes the inputs and decodes the outputs on every call). Rounds are interleaved
(A B C C B A ...) because this machine's speed drifts; the figure is this process's user+system CPU over
the requests of a round, and the median over rounds is printed.

    .venv/bin/python bench/http_client_cost.py [--requests 2000] [--rounds 2] [--repo DIR]
"""

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from accelbench.loadtests import wire  # noqa: E402
from accelbench.loadtests.clients import HttpClient  # noqa: E402

MODEL = "identity__cpu-local__fp32"


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def repo_with_identity(work: Path) -> Path:
    from accelbench.serving.repository import write_repository

    exe = str(Path(sys.executable).parent / "accelbench")
    subprocess.run([exe, "quantize", "builtin:identity", "--target", "cpu-local", "--precision", "fp32",
                    "--out", str(work / "v")], check=True, capture_output=True)  # fmt: skip
    write_repository([work / "v" / MODEL], work / "repo", "local")
    return work / "repo"


def clients(address: str, payload: dict[str, np.ndarray]) -> dict:
    """name → a function sending one request (already encoded where the client allows it)."""
    import tritonclient.http as httpclient
    from geventhttpclient import HTTPClient

    raw = wire.http_request(address, MODEL, payload, ["y"])
    head, _, body = raw.partition(b"\r\n\r\n")
    headers = dict(line.split(": ", 1) for line in head.decode().split("\r\n")[1:] if "Content-Length" not in line
                   or line.startswith("Inference"))  # fmt: skip
    ours = HttpClient(address, 30.0)
    host, port = address.rsplit(":", 1)
    ghc = HTTPClient(host, int(port), connection_timeout=30, network_timeout=30, concurrency=1)
    path = f"/v2/models/{MODEL}/infer"
    tc = httpclient.InferenceServerClient(address, concurrency=1)
    [(name, arr)] = payload.items()
    inp = httpclient.InferInput(name, list(arr.shape), "FP32")
    inp.set_data_from_numpy(arr, binary_data=True)
    out = [httpclient.InferRequestedOutput("y", binary_data=True)]

    def ghc_call() -> None:
        resp = ghc.request("POST", path, body=body, headers=headers)
        resp.read()

    return {"accelbench socket": lambda: ours.exchange(raw), "geventhttpclient": ghc_call,
            "tritonclient.http infer": lambda: tc.infer(MODEL, [inp], outputs=out).as_numpy("y")}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repo", help="a repository serving identity__cpu-local__fp32 (else one is built)")
    args = parser.parse_args()
    from accelbench.serving import LocalTriton

    repo = Path(args.repo) if args.repo else repo_with_identity(Path(tempfile.mkdtemp(prefix="ab-http-")))
    payload = {"x": np.random.default_rng(0).random((1, 16), dtype=np.float32)}
    per: dict[str, list[float]] = {}
    with LocalTriton(repo) as triton:
        calls = clients(triton.http_address, payload)
        order = list(calls)
        for name in order:  # warm each connection once
            calls[name]()
        for r in range(args.rounds):
            for name in order if r % 2 == 0 else order[::-1]:
                c0, t0 = cpu_s(), time.perf_counter()
                for _ in range(args.requests):
                    calls[name]()
                per.setdefault(name, []).append((cpu_s() - c0) * 1e6 / args.requests)
                print(f"{name:>24}: {per[name][-1]:6.1f} µs CPU/request, "
                      f"{args.requests / (time.perf_counter() - t0):7.0f} req/s", flush=True)  # fmt: skip
    print(json.dumps({name: round(statistics.median(v), 1) for name, v in per.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
