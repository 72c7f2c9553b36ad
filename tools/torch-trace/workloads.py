"""Small PyTorch programs whose tensor allocations make the held-out traces in
bench/traces/heldout (recorded on the CPU with record.sh). Usage: workloads.py NAME.

Each one is a pattern a GPU allocator meets in practice: language-model serving with KV caches
that grow token by token (requests of different lengths, arriving at different times),
training with changing sequence lengths, recurrent training, vision training and inference
with changing batch and image sizes. Seeds are fixed, so a run is repeatable up to the order
in which PyTorch's threads free their buffers."""
import random
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def forward(self, x, cache=None):
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in self.qkv(x).split(d, 2))
        if cache is not None:
            if cache[0] is not None:  # the KV cache grows by one step: cat allocates anew
                k = torch.cat([cache[0], k], 2)
                v = torch.cat([cache[1], v], 2)
            cache[0], cache[1] = k, v
        a = (q @ k.transpose(-1, -2)) / (k.shape[-1] ** 0.5)
        if t > 1:
            tk = k.shape[2]
            a = a.masked_fill(~torch.ones(t, tk).tril(tk - t).bool(), float("-inf"))
        y = a.softmax(-1) @ v
        return self.out(y.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.n1, self.att, self.n2 = nn.LayerNorm(d), Attention(d, heads), nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, cache=None):
        x = x + self.att(self.n1(x), cache)
        return x + self.mlp(self.n2(x))


class LM(nn.Module):
    def __init__(self, vocab, d, heads, layers):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(4096, d)
        self.blocks = nn.ModuleList([Block(d, heads) for _ in range(layers)])
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

    def forward(self, ids, caches=None, pos0=0):
        x = self.tok(ids) + self.pos(torch.arange(pos0, pos0 + ids.shape[1]))
        for i, blk in enumerate(self.blocks):
            x = blk(x, caches[i] if caches else None)
        return self.head(self.norm(x))


def serve(requests, d, heads, layers, vocab, prompts, new_tokens, stagger=0):
    """Requests decode in turn (one token each per round), request i joining at round
    i * stagger; a finished request drops its KV cache."""
    model = LM(vocab, d, heads, layers).eval()
    with torch.no_grad():
        reqs = [{"ids": torch.randint(0, vocab, (1, prompts[i])),
                 "cache": [[None, None] for _ in range(layers)],
                 "pos": 0, "left": new_tokens[i], "start": i * stagger} for i in range(requests)]
        rnd = 0
        while any(r["left"] > 0 for r in reqs):
            for r in reqs:
                if r["left"] <= 0 or rnd < r["start"]:
                    continue
                out = model(r["ids"], r["cache"], r["pos"])
                r["pos"] += r["ids"].shape[1]
                r["ids"] = out[:, -1:].argmax(-1)
                r["left"] -= 1
                if r["left"] == 0:
                    r["cache"] = None
            rnd += 1


def train_lm(d, heads, layers, vocab, batch, seq, steps, vary=False):
    model = LM(vocab, d, heads, layers)
    opt = torch.optim.AdamW(model.parameters(), 1e-4)
    for _ in range(steps):
        t = random.choice([64, 96, 128, 192, 256]) if vary else seq
        ids = torch.randint(0, vocab, (batch, t))
        loss = F.cross_entropy(model(ids).view(-1, vocab), ids.view(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()


def lstm():
    vocab = 8000
    emb, rnn, head = nn.Embedding(vocab, 400), nn.LSTM(400, 800, 2, batch_first=True), nn.Linear(800, vocab)
    params = [*emb.parameters(), *rnn.parameters(), *head.parameters()]
    opt = torch.optim.SGD(params, 0.1, momentum=0.9)
    for t in [35, 50, 70, 40]:
        ids = torch.randint(0, vocab, (20, t))
        y, _ = rnn(emb(ids))
        loss = F.cross_entropy(head(y).view(-1, vocab), ids.view(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()


def vision(name):
    import torchvision  # only the vision workloads need it

    if name == "resnet50-infer":
        model = torchvision.models.resnet50().eval()
        with torch.no_grad():
            for b, r in [(1, 224), (8, 224), (4, 320), (16, 160), (2, 288)]:
                model(torch.randn(b, 3, r, r))
        return
    if name == "densenet-train":
        model, classes, size = torchvision.models.densenet121(num_classes=10), 10, 160
        opt = torch.optim.SGD(model.parameters(), 0.01)
    else:  # vit-train
        model, classes, size = torchvision.models.vit_b_16(image_size=128, num_classes=100), 100, 128
        opt = torch.optim.Adam(model.parameters(), 1e-4)
    for _ in range(2):
        loss = F.cross_entropy(model(torch.randn(8, 3, size, size)), torch.randint(0, classes, (8,)))
        opt.zero_grad()
        loss.backward()
        opt.step()


def rand_list(n, lo, hi):
    return [random.randint(lo, hi) for _ in range(n)]


WORKLOADS = {
    "decode8": lambda: serve(8, 512, 8, 6, 8000, [17, 60, 120, 33, 250, 90, 180, 45],
                             [40, 30, 50, 60, 25, 45, 35, 55]),
    "decode-stagger": lambda: serve(6, 768, 12, 4, 5000, [100, 20, 300, 64, 150, 10],
                                    [50, 80, 30, 60, 40, 70], stagger=7),
    "decode-many": lambda: serve(12, 256, 4, 6, 1000, rand_list(12, 8, 300), rand_list(12, 30, 120),
                                 stagger=3),
    "decode-16b": lambda: serve(16, 512, 8, 4, 2000, rand_list(16, 16, 500), rand_list(16, 20, 80),
                                stagger=1),
    "decode-big": lambda: serve(24, 1024, 16, 4, 4000, rand_list(24, 16, 600),
                                rand_list(24, 20, 60), stagger=1),
    "bert-vary": lambda: train_lm(384, 6, 4, 6000, 12, 128, 6, vary=True),
    "gpt-train": lambda: train_lm(640, 10, 6, 10000, 6, 192, 3),
    "lstm-train": lstm,
    "resnet50-infer": lambda: vision("resnet50-infer"),
    "densenet-train": lambda: vision("densenet-train"),
    "vit-train": lambda: vision("vit-train"),
}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in WORKLOADS:
        sys.exit("usage: workloads.py NAME   (NAME: %s)" % ", ".join(WORKLOADS))
    torch.manual_seed(0)
    random.seed(0)
    torch.set_num_threads(2)
    WORKLOADS[sys.argv[1]]()
