#!/usr/bin/python3
"""PyTorch DistributedDataParallel (gloo) peer for Prism's data-parallel benchmarks.

The same models as Prism's reference models, data-parallel over WORLD processes with one thread
each (torch.set_num_threads(1), OPENBLAS_NUM_THREADS=1 set before torch is imported):

  cnn        models/cnn.prism (bench/pytorch_peer.py's Cnn), Adam(lr 0.001), Fashion-MNIST
  embedding  models/embedding_classifier.prism: ROWS x 64 table, 20 tokens, mean-pool,
             128 hidden relu, 10 classes, on synthetic Zipf tokens (exponent 1.1, random labels).
             Dense (default): nn.Embedding(sparse=False), Adam on everything: the whole table's
             gradient is all-reduced and updated every step. --sparse: nn.Embedding(sparse=True),
             DDP all-reduces the sparse gradient (gloo: an all-gather of indices and rows), and
             SparseAdam updates the table while Adam updates the dense layers.

Each rank takes its contiguous share of every global batch (global / WORLD, the first
global % WORLD ranks one more). The first --warmup steps are not timed; the timed steps run
between two barriers, and samples/s is steps x global batch over the slowest rank's time.

Prints one JSON line: {"peer": "ddp", "model", "world", "sparse", "rows", "optimizer",
"samples_per_sec", "steps", "global_batch", "threads", "loss", and with --count-bytes
"wire_bytes_per_step": bytes sent on the non-loopback interfaces of the ranks' network
namespaces (each namespace once) during the timed steps, divided by the steps}.

Launching:
  ddp_peer.py MODEL --world N ...            starts N local ranks (loopback by default)
  ddp_peer.py MODEL --world N --addresses A0,A1,... --launcher 'ip netns exec prism-h{rank}'
                                             starts rank r as TEMPLATE + its command line;
                                             placeholders {rank}, {address}, {host} (--hosts)
  ddp_peer.py MODEL --world N --rank R --addresses ...   runs rank R only (start each yourself)
Rank r binds addresses[r] (gloo's interface is the one holding that address); the rendezvous
store listens on rank 0 at addresses[0]:--port.
Run with Debian's /usr/bin/python3 (python3-torch 1.13).
"""
import argparse
import faulthandler
import gzip
import json
import os
import shlex
import signal
import socket
import struct
import subprocess
import sys
import time

FASHION = "/usr/share/datasets/fashion-mnist"
HERE = os.path.dirname(os.path.abspath(__file__))


# glibc malloc gives large blocks (above 128 KiB .. 32 MiB, adaptively) back to the kernel when
# they are freed, so every optimizer temporary of a big table is fresh memory, page-faulted in
# again at each step. On this project's VM a fault costs ~10 us: Adam over the 100k x 64 table
# takes 150 ms per step with the defaults and 25 ms with these (1M rows: 1.7 s and 0.19 s).
# Prism reuses its buffers; to compare frameworks rather than the VM's page faults, the peer
# keeps freed memory in the heap unless --stock-malloc (bench/distributed/run.py sets the same
# variables for Prism's processes).
MALLOC_ENV = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 36)}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("model", choices=["cnn", "embedding"])
    p.add_argument("--world", type=int, default=2, help="number of ranks (default 2)")
    p.add_argument("--rank", type=int, default=None, help="run this rank only")
    p.add_argument("--addresses", default="",
                   help="comma-separated address of each rank (one address: all ranks); "
                        "default 127.0.0.1")
    p.add_argument("--hosts", default="", help="comma-separated {host} of each rank for "
                                                "--launcher (default h<rank>)")
    p.add_argument("--port", type=int, default=0,
                   help="rendezvous port on rank 0 (default: a free one on loopback, else 29500)")
    p.add_argument("--launcher", default="", help="command prefix template for each rank")
    p.add_argument("--global-batch", type=int, default=0,
                   help="global batch (default 128 for cnn, 64 for embedding)")
    p.add_argument("--steps", type=int, default=50, help="timed steps (default 50)")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first (default 5)")
    p.add_argument("--sparse", action="store_true", help="embedding: sparse gradients")
    p.add_argument("--rows", type=int, default=100000, help="embedding table rows (default 100000)")
    p.add_argument("--tokens", type=int, default=20)
    p.add_argument("--threads", type=int, default=1, help="threads per rank (default 1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--count-bytes", action="store_true",
                   help="report bytes sent on non-loopback interfaces per timed step")
    p.add_argument("--stock-malloc", action="store_true",
                   help="leave glibc malloc's defaults (see MALLOC_ENV)")
    p.add_argument("--timeout", type=float, default=900,
                   help="seconds before the run (and the rendezvous) is abandoned")
    a = p.parse_args(argv)
    if a.global_batch <= 0:
        a.global_batch = 128 if a.model == "cnn" else 64
    if a.world < 1:
        p.error("--world must be >= 1")
    if a.rank is not None and not 0 <= a.rank < a.world:
        p.error("--rank must be in 0..world-1")
    addrs = [x for x in a.addresses.split(",") if x] or ["127.0.0.1"]
    if len(addrs) == 1:
        addrs = addrs * a.world
    if len(addrs) != a.world:
        p.error(f"--addresses gives {len(addrs)} addresses for {a.world} ranks")
    a.addrs = addrs
    hosts = [x for x in a.hosts.split(",") if x] or [f"h{r}" for r in range(a.world)]
    if len(hosts) != a.world:
        p.error(f"--hosts gives {len(hosts)} names for {a.world} ranks")
    a.host_names = hosts
    if a.sparse and a.model != "embedding":
        p.error("--sparse applies to the embedding model")
    return a


# ---------------------------------------------------------------------------------------------
# Launcher (the parent): never imports torch.

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(a, argv):
    if a.port == 0:
        a.port = free_port() if all(x.startswith("127.") for x in a.addrs) else 29500
    # The rank's command: this script with the same options, plus --rank and the port.
    base = [sys.executable, os.path.abspath(__file__)] + argv + ["--port", str(a.port)]
    procs = []
    # SIGTERM/SIGHUP go through the 'finally' below, which ends the ranks.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda s, f: sys.exit(128 + s))
    try:
        for r in range(a.world):
            cmd = base + ["--rank", str(r)]
            if a.launcher:
                prefix = a.launcher.format(rank=r, address=a.addrs[r], host=a.host_names[r])
                cmd = shlex.split(prefix) + cmd
            procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE if r == 0 else None,
                                          text=True))
        deadline = time.monotonic() + a.timeout + 30
        out, _ = procs[0].communicate(timeout=max(1, deadline - time.monotonic()))
        codes = [procs[0].returncode]
        for p in procs[1:]:
            codes.append(p.wait(timeout=max(1, deadline - time.monotonic())))
    except subprocess.TimeoutExpired:
        sys.exit(f"ddp_peer: timed out after {a.timeout:.0f} s")
    finally:
        for p in procs:  # only our own ranks, by their process ids
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    if any(codes):
        sys.exit(f"ddp_peer: rank exit codes {codes}")
    lines = [l for l in out.splitlines() if l.startswith("{")]
    if not lines:
        sys.exit("ddp_peer: rank 0 printed no result")
    print(lines[-1])
    sys.stdout.flush()


# ---------------------------------------------------------------------------------------------
# A rank.

def iface_of(address):
    """The interface holding `address` in this network namespace (gloo binds to it)."""
    if address.startswith("127."):
        return "lo"
    out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True,
                         timeout=10).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 4 and f[3].split("/")[0] == address:
            return f[1]
    sys.exit(f"ddp_peer: no interface holds {address} in this network namespace")


def tx_bytes():
    """Bytes sent on this namespace's non-loopback interfaces."""
    total = 0
    for name in os.listdir("/sys/class/net"):
        if name == "lo":
            continue
        try:
            with open(f"/sys/class/net/{name}/statistics/tx_bytes") as f:
                total += int(f.read())
        except OSError:
            pass
    return total


def read_idx(torch, path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return torch.frombuffer(bytearray(data[4 + 4 * ndim:]), dtype=torch.uint8).reshape(dims)


def shard(global_batch, rank, world):
    """Rank's [begin, end) of a global batch (the first global % world ranks take one more)."""
    q, r = divmod(global_batch, world)
    begin = rank * q + min(rank, r)
    return begin, begin + q + (1 if rank < r else 0)


def run_rank(a):
    # A rank that hangs (a peer gone, a lost connection) prints its stack and exits at the limit.
    faulthandler.dump_traceback_later(a.timeout, exit=True)
    debug = os.environ.get("DDP_PEER_DEBUG") == "1"

    def trace(msg):
        if debug:
            print(f"[rank {a.rank} {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    threads = str(a.threads)
    os.environ["OPENBLAS_NUM_THREADS"] = threads
    os.environ["OMP_NUM_THREADS"] = threads
    os.environ.setdefault("GLOO_SOCKET_IFNAME", iface_of(a.addrs[a.rank]))
    import datetime
    import warnings
    # conv1's weight [32, 1, 5, 5] has a size-1 dimension whose stride autograd picks freely.
    warnings.filterwarnings("ignore", message="Grad strides do not match bucket view strides")
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(a.threads)
    trace(f"init_process_group tcp://{a.addrs[0]}:{a.port} iface {os.environ['GLOO_SOCKET_IFNAME']}")
    dist.init_process_group("gloo", init_method=f"tcp://{a.addrs[0]}:{a.port}", rank=a.rank,
                            world_size=a.world, timeout=datetime.timedelta(seconds=a.timeout))
    trace("process group ready")
    torch.manual_seed(a.seed)
    gen = torch.Generator().manual_seed(a.seed)
    total = a.warmup + a.steps
    G = a.global_batch
    begin, end = shard(G, a.rank, a.world)

    if a.model == "cnn":
        class Cnn(nn.Module):
            """bench/pytorch_peer.py's Cnn = models/cnn.prism."""

            def __init__(self, c=32):
                super().__init__()
                self.convs = nn.ModuleList([
                    nn.Conv2d(1, c, 5, padding=2), nn.Conv2d(c, c, 5, padding=2),
                    nn.Conv2d(c, c, 3, padding=1), nn.Conv2d(c, c, 3, padding=1),
                    nn.Conv2d(c, c, 3, padding=1), nn.Conv2d(c, c, 3, padding=1)])
                self.fc = nn.Linear(c * 3 * 3, 10)

            def forward(self, x):
                x = x.permute(0, 3, 1, 2)
                for i, conv in enumerate(self.convs):
                    x = F.relu(conv(x))
                    if i % 2 == 1:
                        x = F.max_pool2d(x, 2)
                return self.fc(x.reshape(x.shape[0], -1))

        model = Cnn()
        xs = read_idx(torch, f"{FASHION}/train-images-idx3-ubyte.gz").float().div_(255.0)
        xs = xs.reshape(-1, 28, 28, 1)
        ys = read_idx(torch, f"{FASHION}/train-labels-idx1-ubyte.gz").long()
        ddp = DDP(model)
        opts = [torch.optim.Adam(ddp.parameters(), lr=0.001)]
        optimizer = "Adam"
    else:
        class Embedding(nn.Module):
            def __init__(self, rows, sparse):
                super().__init__()
                self.emb = nn.Embedding(rows, 64, sparse=sparse)
                nn.init.uniform_(self.emb.weight, -0.05, 0.05)  # as the .prism file
                self.hidden = nn.Linear(64, 128)
                self.out = nn.Linear(128, 10)

            def forward(self, tokens):
                return self.out(F.relu(self.hidden(self.emb(tokens).mean(1))))

        model = Embedding(a.rows, a.sparse)
        # Zipf tokens (rank r has probability ~ r^-1.1, as zipf:ROWS's default exponent),
        # a pool of fresh examples for every step up to 200k examples, then cycled.
        n = min(G * total, 200000)
        probs = torch.arange(1, a.rows + 1, dtype=torch.float64).pow_(-1.1)
        cdf = torch.cumsum(probs, 0)
        cdf /= cdf[-1].clone()
        u = torch.rand(n * a.tokens, generator=gen, dtype=torch.float64)
        xs = torch.searchsorted(cdf, u).clamp_(max=a.rows - 1).reshape(n, a.tokens)
        ys = torch.randint(0, 10, (n,), generator=gen)
        ddp = DDP(model)
        if a.sparse:
            dense = [q for name, q in ddp.named_parameters() if "emb" not in name]
            opts = [torch.optim.SparseAdam(list(ddp.module.emb.parameters()), lr=0.001),
                    torch.optim.Adam(dense, lr=0.001)]
            optimizer = "SparseAdam(emb)+Adam"
        else:
            opts = [torch.optim.Adam(ddp.parameters(), lr=0.001)]
            optimizer = "Adam"

    N = xs.shape[0]
    per_epoch = N // G
    order = torch.randperm(N, generator=gen)
    netns = os.stat("/proc/self/ns/net").st_ino
    start = bytes0 = None
    loss = torch.zeros(())
    trace("model and data ready")
    for step in range(total):
        trace(f"step {step}")
        if step == a.warmup:
            dist.barrier()
            bytes0 = tx_bytes()
            start = time.perf_counter()
        s = step % per_epoch
        idx = order[s * G + begin:s * G + end]
        for o in opts:
            o.zero_grad(set_to_none=True)
        loss = F.cross_entropy(ddp(xs[idx]), ys[idx])
        loss.backward()
        for o in opts:
            o.step()
    trace("final barrier")
    dist.barrier()
    elapsed = time.perf_counter() - start
    sent = tx_bytes() - bytes0

    info = [None] * a.world
    dist.all_gather_object(info, (elapsed, netns, sent, float(loss)))
    trace("gathered")
    if a.rank == 0:
        slowest = max(x[0] for x in info)
        result = {"peer": "ddp", "model": a.model, "world": a.world,
                  "sparse": bool(a.sparse), "rows": a.rows if a.model == "embedding" else None,
                  "optimizer": optimizer, "samples_per_sec": a.steps * G / slowest,
                  "steps": a.steps, "global_batch": G, "threads": a.threads,
                  "loss": info[0][3], "malloc": "stock" if a.stock_malloc else "tuned"}
        if a.count_bytes:
            per_ns = {}
            for _, ns, b, _ in info:
                per_ns.setdefault(ns, b)  # ranks sharing a namespace see the same counters
            result["wire_bytes_per_step"] = sum(per_ns.values()) / a.steps
        print(json.dumps(result))
    sys.stdout.flush()
    sys.stderr.flush()
    # Tearing down gloo's process group (destroy_process_group, or the destructors at return)
    # sometimes hangs in torch 1.13 when the peers leave at the same time: meet once more, then
    # leave without running destructors.
    dist.barrier()
    trace("exit")
    os._exit(0)


def main():
    argv = sys.argv[1:]
    a = parse_args(argv)
    if not a.stock_malloc and any(os.environ.get(k) != v for k, v in MALLOC_ENV.items()):
        # glibc reads these when the process starts: start again with them (once).
        os.execve(sys.executable, [sys.executable, os.path.abspath(__file__)] + argv,
                  dict(os.environ, **MALLOC_ENV))
    if a.rank is None:
        launch(a, argv)
    else:
        run_rank(a)


if __name__ == "__main__":
    main()
