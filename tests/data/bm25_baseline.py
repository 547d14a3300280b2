"""Plain BM25 reference baseline for a tool-selection set (tools.json, queries.jsonl, gold.jsonl).

Usage: python3 tests/data/bm25_baseline.py SET_DIR
Prints {"all@1": ..., "all@3": ..., "all@5": ..., "all@10": ...}: the fraction of requests whose
whole gold set is within the top k tools.

Okapi BM25, k1 = 1.5, b = 0.75, idf = ln(1 + (N - n + 0.5) / (n + 0.5)). A tool's document is its
name split on `_`, `-` and camelCase, then its description; a request's is its text. Both are
lowercased and cut into runs of letters and digits; no stemming, no stop words. Ties keep catalog
order. Standard library only."""
import collections
import json
import math
import pathlib
import re
import sys

K1, B = 1.5, 0.75
KS = (1, 3, 5, 10)


def tokens(text):
    return re.findall(r"[^\W_]+", text.lower())


def name_words(name):
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    spaced = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1 \2", spaced)
    return spaced.replace("_", " ").replace("-", " ")


def main(set_dir):
    set_dir = pathlib.Path(set_dir)
    tools = json.loads((set_dir / "tools.json").read_text(encoding="utf-8"))["tools"]
    queries = [json.loads(line) for line in (set_dir / "queries.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    gold = {}
    for line in (set_dir / "gold.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            gold[row["id"]] = set(row["tools"])

    docs = [tokens(name_words(t["name"]) + " " + (t.get("description") or "")) for t in tools]
    tfs = [collections.Counter(d) for d in docs]
    lengths = [len(d) for d in docs]
    avgdl = sum(lengths) / len(lengths)
    df = collections.Counter(term for tf in tfs for term in tf)
    n_docs = len(docs)
    idf = {term: math.log(1 + (n_docs - n + 0.5) / (n + 0.5)) for term, n in df.items()}

    hits = dict.fromkeys(KS, 0)
    for query in queries:
        terms = collections.Counter(tokens(query["query"]))
        scores = []
        for i, tf in enumerate(tfs):
            norm = K1 * (1 - B + B * lengths[i] / avgdl)
            score = 0.0
            for term, qtf in terms.items():
                f = tf.get(term)
                if f:
                    score += qtf * idf[term] * f * (K1 + 1) / (f + norm)
            scores.append(score)
        order = sorted(range(n_docs), key=lambda i: -scores[i])
        rank = {tools[i]["name"]: r for r, i in enumerate(order)}
        worst = max(rank[name] for name in gold[query["id"]])
        for k in KS:
            if worst < k:
                hits[k] += 1
    print(json.dumps({f"all@{k}": round(hits[k] / len(queries), 4) for k in KS}))


if __name__ == "__main__":
    main(sys.argv[1])
