"""PyTorch side of the ONNX import tests: the models, their export, and training them on the
same arrays Prism trains on (npy:DIR), so the two losses can be compared step by step.

  torch_models.py export MODEL OUT.onnx [OPSET [training|eval]]    (MODEL: a key of MODELS)
  torch_models.py inference-batchnorm IN.onnx OUT.onnx  BatchNormalization nodes as inference
  torch_models.py data DIR N                       N Fashion-MNIST examples in DIR/train, N/4 in
                                                   DIR/test (as npy arrays x [N, 784], y [N])
  torch_models.py noise DIR N                      the same with uniform random images and labels
  torch_models.py tokens DIR N                     the same with int32 tokens [N, 8] (encoder)
  torch_models.py train MODEL OUT.onnx DIR STEPS BATCH OPTIMIZER LR LOSSES.json

`train` loads the initial weights from the exported file's PyTorch twin (saved by `export` as
OUT.onnx.pt), trains STEPS steps in Prism's data order (docs/data.md, seed 1) and writes the
loss of each step.
"""
import json
import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(784, 128)
        self.fc2 = torch.nn.Linear(128, 10)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 8, 5, padding=2)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.fc = torch.nn.Linear(16 * 7 * 7, 10)

    def forward(self, x):
        x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        # view(size(0), -1) exports as Shape -> Gather -> Unsqueeze -> Concat -> Reshape.
        return self.fc(x.view(x.size(0), -1))


class WithBatchNorm(torch.nn.Module):
    """BatchNormalization after a convolution."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)
        self.fc = torch.nn.Linear(4 * 28 * 28, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.bn(self.conv(x)), 1))


class WithCos(torch.nn.Module):
    """Cos: an ONNX op Prism does not map."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(784, 10)

    def forward(self, x):
        return torch.cos(self.fc(x))


class WithDropout(torch.nn.Module):
    """Dropout: the identity (with a note) until Prism has a dropout op."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(784, 32)
        self.drop = torch.nn.Dropout(0.25)
        self.fc2 = torch.nn.Linear(32, 10)

    def forward(self, x):
        return self.fc2(self.drop(torch.tanh(self.fc1(x))))


class Mixed(torch.nn.Module):
    """The other mapped ops: Transpose, a strided valid Conv, Sigmoid, AveragePool,
    GlobalAveragePool, Flatten, Concat, Slice, arithmetic with constants, Tanh, LogSoftmax."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3, stride=2)
        self.fc = torch.nn.Linear(100, 10)

    def forward(self, x):
        h = torch.sigmoid(self.conv(x.transpose(2, 3)))
        pooled = torch.flatten(torch.nn.functional.avg_pool2d(h, 2), 1)
        mean = torch.flatten(torch.nn.functional.adaptive_avg_pool2d(h, 1), 1)
        z = (torch.cat([pooled, mean], 1)[:, :100] * 2.0 - 0.5) / 3.0
        return torch.log_softmax(self.fc(torch.tanh(z)), -1)


class Modern(torch.nn.Module):
    """The ops of newer models: a ResNet stem (7x7 stride-2 conv and 3x3 stride-2 max pool whose
    pads are neither same nor valid), LayerNorm (opset 17), products of rank 3 as attention has
    them, GELU (Erf), Max, and a mean over positions (ReduceMean)."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(1, 8, 7, stride=2, padding=3, bias=False)
        self.norm = torch.nn.LayerNorm(8)
        self.q = torch.nn.Linear(8, 8)
        self.k = torch.nn.Linear(8, 8)
        self.fc = torch.nn.Linear(8, 10)

    def forward(self, x):
        h = torch.nn.functional.max_pool2d(torch.relu(self.stem(x)), 3, 2, 1)
        t = self.norm(h.flatten(2).transpose(1, 2))
        scores = torch.softmax(self.q(t) @ self.k(t).transpose(1, 2) / 8 ** 0.5, -1)
        t = torch.nn.functional.gelu(scores @ t)
        return self.fc(torch.maximum(t, 0.5 * t).mean(1))


class Encoder(torch.nn.Module):
    """nn.TransformerEncoder (two layers, dropout 0 so that PyTorch and Prism train alike): its
    nn.MultiheadAttention reshapes to [T, B*heads, D] and [T*B, E], multiples of the batch."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, 32)
        layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation="gelu",
                                                 batch_first=True)
        self.enc = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.fc = torch.nn.Linear(32, 10)

    def forward(self, t):
        return self.fc(self.enc(self.emb(t)).mean(1))


VOCAB, TOKENS = 1000, 8


class Multiples(torch.nn.Module):
    """Pixels in groups of 4, [B*196, 4] (a multiple of the batch), through the other rules:
    broadcasting against [1, 4] and [4], a mean over the last axis, a Concat, and back to
    [B, 980]."""

    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.rand(1, 4) + 0.5)
        self.shift = torch.nn.Parameter(torch.rand(4) - 0.5)
        self.fc = torch.nn.Linear(980, 10)

    def forward(self, x):
        h = torch.tanh(x.view(-1, 4) * self.scale + self.shift)
        h = torch.cat([h, h.mean(-1, keepdim=True)], 1)
        return self.fc(h.reshape(x.size(0), -1))


class GroupedAxis(torch.nn.Module):
    """A softmax, or a product's contraction, over the axis B*2 of [4, B*2]: a multiple of the
    batch, which Prism holds as two dimensions and cannot compute over."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind

    def forward(self, x):
        h = x.view(-1, 4)
        return torch.softmax(h.t(), -1) if self.kind == "softmax" else h.t() @ h

# name: (class, the shape of one example, its dtype)
def resnet18():
    """torchvision's ResNet-18 (random weights) for 1-channel 28x28 images and 10 classes."""
    import torchvision
    model = torchvision.models.resnet18(weights=None, num_classes=10)
    model.conv1 = torch.nn.Conv2d(1, 64, 7, stride=2, padding=3, bias=False)
    return model


MODELS = {"resnet18": (resnet18, (1, 28, 28)),
          "encoder": (Encoder, (TOKENS,), torch.int32), "modern": (Modern, (1, 28, 28)), "mixed": (Mixed, (1, 28, 28)), "mlp": (Mlp, (784,)), "cnn": (Cnn, (1, 28, 28)), "batchnorm": (WithBatchNorm, (1, 28, 28)),
          "cos": (WithCos, (784,)),
          "multiples": (Multiples, (784,)),
          "grouped-softmax": (lambda: GroupedAxis("softmax"), (8,)),
          "grouped-contraction": (lambda: GroupedAxis("contraction"), (8,)), "dropout": (WithDropout, (784,))}


def export(name, path, opset="13", mode="training"):
    torch.manual_seed(0)
    model_class, shape, dtype = (MODELS[name] + (torch.float32,))[:3]
    model = model_class()
    torch.save(model.state_dict(), path + ".pt")
    training = (torch.onnx.TrainingMode.TRAINING if mode == "training"
                else torch.onnx.TrainingMode.EVAL)
    torch.onnx.export(model, torch.zeros((2,) + shape, dtype=dtype), path, opset_version=int(opset),
                      training=training, do_constant_folding=False,
                      input_names=["x"], output_names=["logits"],
                      dynamic_axes={"x": {0: "B"}, "logits": {0: "B"}})


def inference_batchnorm(source, target):
    """The exported graph with its BatchNormalization nodes in inference mode (one output), as
    other exporters write them (PyTorch folds them into the convolution in eval mode)."""
    import onnx
    model = onnx.load(source)
    for node in model.graph.node:
        if node.op_type == "BatchNormalization":
            del node.output[1:]
    onnx.save(model, target)


FASHION_MNIST = "/usr/share/datasets/fashion-mnist"


def fashion_mnist(split, rows):
    """The first `rows` images (floats in [0, 1], [rows, 784]) and labels of Debian's
    Fashion-MNIST; `split` is train or t10k."""
    import gzip
    with gzip.open(os.path.join(FASHION_MNIST, split + "-images-idx3-ubyte.gz")) as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16)[:rows * 784]
    with gzip.open(os.path.join(FASHION_MNIST, split + "-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)[:rows]
    return ((images.reshape(rows, 784) / np.float32(255)).astype(np.float32),
            labels.astype(np.int32))


def data(directory, n):
    """Real images and labels, so that 20 steps learn rather than memorize random labels (a
    loss near zero makes relative differences meaningless)."""
    for split, rows, source in (("train", n, "train"), ("test", max(1, n // 4), "t10k")):
        os.makedirs(os.path.join(directory, split), exist_ok=True)
        x, y = fashion_mnist(source, rows)
        np.save(os.path.join(directory, split, "x.npy"), x)
        np.save(os.path.join(directory, split, "y.npy"), y)


def noise(directory, n):
    """Uniform random images and labels."""
    rng = np.random.default_rng(0)
    for split, rows in (("train", n), ("test", max(1, n // 4))):
        os.makedirs(os.path.join(directory, split), exist_ok=True)
        np.save(os.path.join(directory, split, "x.npy"), rng.random((rows, 784), dtype=np.float32))
        np.save(os.path.join(directory, split, "y.npy"),
                rng.integers(0, 10, rows).astype(np.int32))


def tokens(directory, n):
    """Token ids as int32 (the exported model's input dtype; npy:DIR wants it exact), labelled
    by their first token (mod 10), a rule to learn rather than labels to memorize."""
    rng = np.random.default_rng(0)
    for split, rows in (("train", n), ("test", max(1, n // 4))):
        os.makedirs(os.path.join(directory, split), exist_ok=True)
        x = rng.integers(0, VOCAB, (rows, TOKENS)).astype(np.int32)
        np.save(os.path.join(directory, split, "x.npy"), x)
        np.save(os.path.join(directory, split, "y.npy"), (x[:, 0] % 10).astype(np.int32))


MASK = (1 << 64) - 1


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


class Mt19937_64:
    """std::mt19937_64, for Prism's data order."""

    def __init__(self, seed):
        self.mt = [seed & MASK]
        for i in range(1, 312):
            prev = self.mt[-1]
            self.mt.append((6364136223846793005 * (prev ^ (prev >> 62)) + i) & MASK)
        self.index = 312

    def __call__(self):
        if self.index >= 312:
            for i in range(312):
                x = (self.mt[i] & 0xFFFFFFFF80000000) | (self.mt[(i + 1) % 312] & 0x7FFFFFFF)
                xa = x >> 1
                if x & 1:
                    xa ^= 0xB5026F5AA96619E9
                self.mt[i] = self.mt[(i + 156) % 312] ^ xa
            self.index = 0
        y = self.mt[self.index]
        self.index += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        return y & MASK


def epoch_order(n, seed, epoch):
    """Prism's order of the examples in one epoch (docs/data.md, "Data order")."""
    order = list(range(n))
    gen = Mt19937_64(splitmix64((seed + epoch) & MASK))
    for i in range(n - 1, 0, -1):
        j = (gen() * (i + 1)) >> 64
        order[i], order[j] = order[j], order[i]
    return order


def train(name, path, directory, steps, batch, optimizer, lr, out):
    model_class, shape = MODELS[name][:2]
    model = model_class()
    model.load_state_dict(torch.load(path + ".pt"))
    x = torch.from_numpy(np.load(os.path.join(directory, "train", "x.npy")))
    y = torch.from_numpy(np.load(os.path.join(directory, "train", "y.npy"))).long()
    opts = [torch.optim.SGD(model.parameters(), lr=lr)]
    if optimizer == "adam":
        # Prism's Adam is lazy on embedding tables (their gradients are sparse: only the rows
        # read move, docs/ops.md apply_adam), as SparseAdam is; dense Adam for the rest.
        tables = [m for m in model.modules() if isinstance(m, torch.nn.Embedding)]
        for m in tables:
            m.sparse = True
        sparse = {id(p) for m in tables for p in m.parameters()}
        opts = [torch.optim.Adam([p for p in model.parameters() if id(p) not in sparse], lr=lr)]
        if sparse:
            opts.append(torch.optim.SparseAdam([p for m in tables for p in m.parameters()], lr=lr))
    n = x.shape[0]
    per_epoch = (n + batch - 1) // batch
    losses = []
    for step in range(steps):
        epoch, k = divmod(step, per_epoch)
        rows = epoch_order(n, 1, epoch)[k * batch:(k + 1) * batch]
        logits = model(x[rows].reshape((len(rows),) + shape))
        loss = torch.nn.functional.cross_entropy(logits, y[rows])
        losses.append(loss.item())
        for opt in opts:
            opt.zero_grad()
        loss.backward()
        for opt in opts:
            opt.step()
    with open(out, "w") as f:
        json.dump(losses, f)


def compare(torch_losses, prism_metrics, tolerance):
    """Exits non-zero unless each step's loss agrees within `tolerance` (relative)."""
    with open(torch_losses) as f:
        expected = json.load(f)
    with open(prism_metrics) as f:
        got = [json.loads(line)["loss"] for line in f if '"samples_per_sec"' in line]
    if len(got) != len(expected):
        sys.exit(f"prism trained {len(got)} steps, PyTorch {len(expected)}")
    for step, (a, b) in enumerate(zip(expected, got)):
        status = "ok" if abs(a - b) <= tolerance * abs(a) else "MISMATCH"
        print(f"step {step}: pytorch {a:.7f} prism {b:.7f} {status}")
        if status != "ok":
            sys.exit(1)
    print(f"losses agree within {tolerance} over {len(got)} steps")


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    if command == "export":
        export(*args)
    elif command == "inference-batchnorm":
        inference_batchnorm(args[0], args[1])
    elif command == "data":
        data(args[0], int(args[1]))
    elif command == "noise":
        noise(args[0], int(args[1]))
    elif command == "tokens":
        tokens(args[0], int(args[1]))
    elif command == "train":
        train(args[0], args[1], args[2], int(args[3]), int(args[4]), args[5], float(args[6]),
              args[7])
    elif command == "compare":
        compare(args[0], args[1], float(args[2]))
    else:
        sys.exit(__doc__)
