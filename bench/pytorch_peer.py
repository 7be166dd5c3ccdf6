#!/usr/bin/python3
"""PyTorch peer for bench/single_device: the same models, optimizer, batch and data as Prism.

Prints one JSON line: {"model", "threads", "samples_per_sec", "steps", "peak_rss_mb", and
"test_accuracy" when --epochs is given, "test_accuracy_by_epoch" with --eval-every-epoch}.
--bf16 trains under bf16 autocast. Run with Debian's /usr/bin/python3 (python3-torch).
--device cuda trains on the GPU (a CUDA build of PyTorch) and adds "peak_gpu_allocated_mb" and
"peak_gpu_reserved_mb"; --compile trains the torch.compile'd model; on the GPU, products and
convolutions are float32 unless --tf32. PRISM_FASHION_MNIST names
the Fashion-MNIST folder where it is not Debian's.
"""
import argparse
import gzip
import json
import os
import resource
import struct
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

FASHION = os.environ.get("PRISM_FASHION_MNIST", "/usr/share/datasets/fashion-mnist")


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return torch.frombuffer(bytearray(data[4 + 4 * ndim:]), dtype=torch.uint8).reshape(dims)


def fashion(split):
    prefix = "train" if split == "train" else "t10k"
    x = read_idx(f"{FASHION}/{prefix}-images-idx3-ubyte.gz").float() / 255.0
    y = read_idx(f"{FASHION}/{prefix}-labels-idx1-ubyte.gz").long()
    return x.reshape(-1, 28, 28, 1), y


class Mlp(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        dims = [784] + hidden + [10]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims, dims[1:]))

    def forward(self, x):
        x = x.reshape(x.shape[0], -1)
        for layer in self.layers[:-1]:
            x = F.relu(layer(x))
        return self.layers[-1](x)


class Cnn(nn.Module):
    """The seed notebook's CNN: conv5x5 x2, pool, conv3x3 x2, pool, conv3x3 x2, pool, fc."""

    def __init__(self, c=32):
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv2d(1, c, 5, padding=2), nn.Conv2d(c, c, 5, padding=2),
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


class Embedding(nn.Module):
    def __init__(self, vocab=100000, dim=64, classes=10):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim, sparse=True)
        self.hidden = nn.Linear(dim, 128)
        self.out = nn.Linear(128, classes)

    def forward(self, tokens):
        return self.out(F.relu(self.hidden(self.emb(tokens).mean(1))))


class Transformer(nn.Module):
    """models/transformer.prism: token + position embeddings, two post-norm encoder layers
    (4 heads of 16, feed-forward 128, GELU, dropout 0.1), mean over positions, 10 classes."""

    def __init__(self, vocab=10000, tokens=20, dim=64, classes=10):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim, sparse=True)
        self.pos = nn.Parameter(torch.randn(tokens, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, 4, 128, dropout=0.1, activation="gelu",
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.drop = nn.Dropout(0.1)
        self.out = nn.Linear(dim, classes)

    def forward(self, tokens):
        x = self.drop(self.emb(tokens) + self.pos)
        return self.out(self.encoder(x).mean(1))


class LstmLm(nn.Module):
    """models/lstm_lm.prism: embedding 128, one LSTM layer of 128 over 20 steps, a full softmax
    over the 10,000 words at every step, the mean of the per-step losses."""

    def __init__(self, vocab=10000, dim=128):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim, sparse=True)
        self.lstm = nn.LSTM(dim, dim, batch_first=True)
        self.out = nn.Linear(dim, vocab)

    def forward(self, tokens):
        hidden, _ = self.lstm(self.emb(tokens))
        return self.out(hidden)


class ResNet(nn.Module):
    """models/resnet.prism: a 3x3 stem to 16 channels, 3 stages of 9 basic blocks (convolutions
    with bias, no batch norm) at 16/32/64 channels, stride-2 entries with 1x1 projections, global
    average pool, 10 classes."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(1, 16, 3, padding=1)
        self.blocks = nn.ModuleList()
        cin = 16
        for stage, c in enumerate([16, 32, 64]):
            for b in range(9):
                stride = 2 if stage > 0 and b == 0 else 1
                conv1 = nn.Conv2d(cin, c, 3, stride=stride, padding=1)
                conv2 = nn.Conv2d(c, c, 3, padding=1)
                nn.init.zeros_(conv2.weight)
                proj = nn.Conv2d(cin, c, 1, stride=stride) if stride == 2 else None
                self.blocks.append(nn.ModuleList([conv1, conv2] + ([proj] if proj else [])))
                cin = c
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.stem(x.permute(0, 3, 1, 2)))
        for block in self.blocks:
            shortcut = block[2](x) if len(block) == 3 else x
            x = F.relu(block[1](F.relu(block[0](x))) + shortcut)
        return self.fc(x.mean((2, 3)))


def zipf_tokens(vocab, gen):
    """Zipf-like ids (rank r with probability ~ 1/r^1.1) and random labels."""
    ranks = torch.arange(1, vocab + 1, dtype=torch.float64)
    probs = ranks.pow(-1.1)
    tokens = torch.multinomial(probs / probs.sum(), 256 * 20 * 64, replacement=True,
                               generator=gen).reshape(-1, 20)
    return tokens, torch.randint(0, 10, (tokens.shape[0],), generator=gen)


class ResNet18(nn.Module):
    """torchvision's ResNet-18 for 1-channel 28x28 images and 10 classes, reading NHWC."""

    def __init__(self):
        super().__init__()
        import torchvision
        self.net = torchvision.models.resnet18(weights=None, num_classes=10)
        self.net.conv1 = nn.Conv2d(1, 64, 7, stride=2, padding=3, bias=False)

    def forward(self, x):
        return self.net(x.permute(0, 3, 1, 2))


def sequence_batches(vocab, gen):
    """Zipf-like sequences of 20 ids and, as targets, the same stream one position on."""
    ranks = torch.arange(1, vocab + 1, dtype=torch.float64)
    probs = ranks.pow(-1.1)
    stream = torch.multinomial(probs / probs.sum(), 256 * 64 * 21, replacement=True,
                               generator=gen).reshape(-1, 21)
    return stream[:, :20].contiguous(), stream[:, 1:].contiguous()


def accuracy(model, test, bf16):
    """Test accuracy in evaluation mode (batch norm on its running averages), 1,000 at a time."""
    model.eval()
    correct = 0
    device = test[0].device.type
    with torch.no_grad(), torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
        for i in range(0, test[0].shape[0], 1000):
            logits = model(test[0][i:i + 1000])
            correct += (logits.argmax(1) == test[1][i:i + 1000]).sum().item()
    model.train()
    return correct / test[0].shape[0]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model",
                   choices=["mlp", "mlp1024", "cnn", "embedding", "transformer", "resnet18",
                            "lstm_lm", "resnet"])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--steps", type=int, default=0)
    p.add_argument("--epochs", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-every-epoch", action="store_true",
                   help="test accuracy at each epoch end (evaluation mode), not timed")
    p.add_argument("--bf16", action="store_true",
                   help="bf16 autocast (linear and convolution in bf16, weights f32)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--compile", action="store_true", help="train the torch.compile'd model")
    p.add_argument("--tf32", action="store_true",
                   help="matrix products and convolutions in TF32 on the GPU (else float32: "
                        "PyTorch's own default lets cuDNN's convolutions use TF32)")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    if a.model == "lstm_lm":
        model = LstmLm()
        gen = torch.Generator().manual_seed(a.seed)
        train_x, train_y = sequence_batches(model.emb.num_embeddings, gen)
        dense = [q for n, q in model.named_parameters() if not n.startswith("emb")]
        opts = [torch.optim.SparseAdam(list(model.emb.parameters()), lr=0.001),
                torch.optim.Adam(dense, lr=0.001)]
        test = None
    elif a.model == "resnet":
        model = ResNet()
        opts = [torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)]
        train_x, train_y = fashion("train")
        test = fashion("test")
    elif a.model in ("embedding", "transformer"):
        model = Embedding() if a.model == "embedding" else Transformer()
        gen = torch.Generator().manual_seed(a.seed)
        tokens, labels = zipf_tokens(model.emb.num_embeddings, gen)
        dense = [q for n, q in model.named_parameters() if not n.startswith("emb")]
        opts = [torch.optim.SparseAdam(list(model.emb.parameters()), lr=0.001),
                torch.optim.Adam(dense, lr=0.001)]
        train_x, train_y, test = tokens, labels, None
    elif a.model == "resnet18":
        # models/resnet18.prism's module and optimizer: torchvision's ResNet-18 with a 1-channel
        # stem (NCHW: for one channel the same memory as the NHWC images).
        model = ResNet18()
        opts = [torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)]
        train_x, train_y = fashion("train")
        test = fashion("test")
    else:
        model = {"mlp": lambda: Mlp([256]), "mlp1024": lambda: Mlp([1024, 1024]),
                 "cnn": lambda: Cnn()}[a.model]()
        opts = [torch.optim.Adam(model.parameters(), lr=0.001)]
        train_x, train_y = fashion("train")
        test = fashion("test")
    cuda = a.device == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = a.tf32
        torch.backends.cudnn.allow_tf32 = a.tf32
        # Module.to moves each parameter's data in place, so the optimizers keep their params.
        model.to("cuda")
        train_x, train_y = train_x.to("cuda"), train_y.to("cuda")
        if test is not None:
            test = (test[0].to("cuda"), test[1].to("cuda"))
    forward = torch.compile(model) if a.compile else model
    n = train_x.shape[0]
    steps_per_epoch = (n + a.batch - 1) // a.batch
    total = a.steps or a.epochs * steps_per_epoch
    gen = torch.Generator().manual_seed(a.seed)
    order = torch.randperm(n, generator=gen).to(train_x.device)
    warmup = 0 if a.eval_every_epoch else min(5, total)
    start = time.perf_counter()
    evaluating = 0.0
    accuracies = []
    if a.compile:
        warmup = max(warmup, 3)  # the first steps compile
    for step in range(total + warmup):
        if step == warmup:
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            start = time.perf_counter()
        s = step % steps_per_epoch
        if s == 0 and step > 0:
            if a.eval_every_epoch:
                began = time.perf_counter()
                accuracies.append(accuracy(model, test, a.bf16))
                evaluating += time.perf_counter() - began
            order = torch.randperm(n, generator=gen).to(train_x.device)
        idx = order[s * a.batch:(s + 1) * a.batch]
        for o in opts:
            o.zero_grad(set_to_none=True)
        with torch.autocast(a.device, dtype=torch.bfloat16, enabled=a.bf16):
            logits = forward(train_x[idx])
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), train_y[idx].reshape(-1))
        loss.backward()
        for o in opts:
            o.step()
    if cuda:
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start - evaluating
    result = {"model": a.model, "threads": a.threads, "batch": a.batch, "steps": total,
              "samples_per_sec": total * a.batch / elapsed,
              "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if cuda:
        result["device"] = torch.cuda.get_device_name()
        result["compile"] = a.compile
        result["tf32"] = a.tf32
        result["peak_gpu_allocated_mb"] = torch.cuda.max_memory_allocated() / 2**20
        result["peak_gpu_reserved_mb"] = torch.cuda.max_memory_reserved() / 2**20
    if a.epochs and test is not None:
        result["test_accuracy"] = accuracy(model, test, a.bf16)
        if a.eval_every_epoch:
            result["test_accuracy_by_epoch"] = accuracies + [result["test_accuracy"]]
    print(json.dumps(result))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
