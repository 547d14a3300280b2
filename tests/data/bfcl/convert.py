"""Converts the Berkeley Function Calling Leaderboard's single-turn categories into the shapes
`quiver select` reads: one pooled tool catalog, the questions, and the functions each needs.

Usage: python3 convert.py GORILLA_CHECKOUT  (writes tools.json, queries.jsonl, gold.jsonl here)

Every function offered with any question joins one catalog, keyed by name (the first definition
of a name is kept: several categories repeat a function with small schema edits); BFCL's
schema dialect is mapped to JSON Schema (`dict` -> `object`, `float` -> `number`, `tuple` ->
`array`, `any` dropped). A question's gold set is the functions its ground truth calls."""
import json
import pathlib
import sys

CATEGORIES = [
    "simple_python", "multiple", "parallel", "parallel_multiple",
    "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple",
]
TYPES = {"dict": "object", "float": "number", "tuple": "array"}


def json_schema(schema):
    if isinstance(schema, dict):
        out = {}
        for key, value in schema.items():
            # Under "properties" a parameter may be called "type"; its value is then a schema.
            if key == "type" and value == "any":
                continue
            if key == "type" and isinstance(value, str):
                value = TYPES.get(value, value)
            out[key] = json_schema(value)
        return out
    if isinstance(schema, list):
        return [json_schema(item) for item in schema]
    return schema


def main(checkout):
    data = pathlib.Path(checkout) / "berkeley-function-call-leaderboard" / "bfcl_eval" / "data"
    here = pathlib.Path(__file__).parent
    tools, seen, queries, gold = [], set(), [], []
    for category in CATEGORIES:
        name = f"BFCL_v4_{category}.json"
        answers = {}
        for line in (data / "possible_answer" / name).read_text().splitlines():
            answer = json.loads(line)
            answers[answer["id"]] = answer["ground_truth"]
        for line in (data / name).read_text().splitlines():
            question = json.loads(line)
            offered = set()
            for function in question["function"]:
                offered.add(function["name"])
                if function["name"] not in seen:
                    seen.add(function["name"])
                    empty = {"type": "object", "properties": {}}
                    tools.append({
                        "name": function["name"],
                        "description": function.get("description", ""),
                        "inputSchema": json_schema(function.get("parameters", empty)),
                    })
            needed = sorted({next(iter(call)) for call in answers.get(question["id"], [])} & offered)
            if not needed:
                continue
            text = " ".join(m["content"] for turn in question["question"] for m in turn
                            if m["role"] == "user")
            queries.append({"id": question["id"], "query": text})
            gold.append({"id": question["id"], "tools": needed})
    (here / "tools.json").write_text(json.dumps({"tools": tools}, indent=0) + "\n")
    (here / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (here / "gold.jsonl").write_text("".join(json.dumps(g) + "\n" for g in gold))
    print(f"{len(tools)} tools, {len(queries)} questions")


if __name__ == "__main__":
    main(sys.argv[1])
