"""Converts LiveMCPBench (its LiveMCPTool catalogue of real MCP servers and its annotated tasks)
into the shapes `quiver select` reads: one tool catalog, the requests, and the tools each needs.

Usage: python3 convert.py [UPSTREAM_DIR]  (default /tmp/mcp-datasets/livemcpbench; it holds
upstream's tools/LiveMCPTool/tools.json as tools.json and annotated_data/all_annotations.json as
all_annotations.json; writes tools.json, queries.jsonl, gold.jsonl beside this script)

Every server's tools join one catalog, each named SERVER_TOOL as a gateway prefixes upstream
tools: SERVER is the server's config key (its `mcpServers` key) lowercased, every run of other
characters than letters and digits made `_`, and a leading or trailing `mcp` / `server` word
dropped (`osm-mcp-server` -> `osm`); two keys upstream mislabels (`searxng` is the mcp-doc-forge
document server, `coin-flip` the LeetCode server) are named after their repositories instead.
TOOL, the description (a missing one as "") and inputSchema are upstream's as given.

A task's gold is its `Annotator Metadata.Tools`, a numbered list of bare tool names. A name one
server exposes maps to that server's tool. A name several servers expose maps to the one
candidate the annotation itself names: a word of that candidate's server id, not of any other
candidate's id nor of the tool's own name, found in one of the task's text fields (Question,
answers, category, file_name, Steps). A task keeps its request only if every gold name maps to
exactly one catalog tool; the others are dropped and counted by reason."""
import collections
import json
import pathlib
import re
import sys

# The set's file format, shared by every converter in tests/data/.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from eval_set import write_set  # noqa: E402

DEFAULT_UPSTREAM = "/tmp/mcp-datasets/livemcpbench"
# Config keys upstream gives the wrong server (the key of another server's config was reused).
RENAMED = {"searxng": "doc_forge", "coin-flip": "leetcode"}
GENERIC = {"mcp", "server"}


def server_id(key):
    if key in RENAMED:
        return RENAMED[key]
    words = [w for w in re.split(r"[^a-z0-9]+", key.lower()) if w]
    while len(words) > 1 and words[0] in GENERIC:
        words.pop(0)
    while len(words) > 1 and words[-1] in GENERIC:
        words.pop()
    return "_".join(words)


def words(text):
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def main(upstream):
    upstream = pathlib.Path(upstream)
    here = pathlib.Path(__file__).parent
    servers = json.loads((upstream / "tools.json").read_text(encoding="utf-8"))
    tools, owners, ids = [], collections.defaultdict(list), set()
    for server in servers:
        (key, listing), = server["tools"].items()
        sid = server_id(key)
        assert sid not in ids, f"two servers named {sid}"
        ids.add(sid)
        for tool in listing["tools"]:
            name = f"{sid}_{tool['name']}"
            owners[tool["name"]].append((sid, name))
            tools.append({
                "name": name,
                "description": tool.get("description") or "",
                "inputSchema": tool["inputSchema"],
            })
    assert len({t["name"] for t in tools}) == len(tools)

    tasks = json.loads((upstream / "all_annotations.json").read_text(encoding="utf-8"))
    queries, gold = [], []
    dropped = collections.Counter()
    unknown, ambiguous, hinted = collections.Counter(), collections.Counter(), []
    for task in tasks:
        meta = task["Annotator Metadata"]
        names = [re.sub(r"^\d+\.\s*", "", line).strip() for line in meta["Tools"].split("\n")]
        names = list(dict.fromkeys(n for n in names if n))
        text = words(" ".join([task["Question"], task.get("answers", ""), task.get("category", ""),
                               task.get("file_name", ""), meta.get("Steps", "")]))
        needed, missing, unresolved = [], [], []
        for bare in names:
            candidates = owners.get(bare, [])
            if not candidates:
                missing.append(bare)
                continue
            if len(candidates) > 1:
                named = []
                for sid, full in candidates:
                    others = set().union(*(words(o.replace("_", " ")) for o, _ in candidates if o != sid))
                    own = words(sid.replace("_", " ")) - others - words(bare.replace("_", " "))
                    if own & text:
                        named.append((sid, full, sorted(own & text)))
                if len(named) != 1:
                    unresolved.append(bare)
                    continue
                hinted.append((task["task_id"], bare, named[0][1], named[0][2]))
                candidates = named[0][:2],
            needed.append(candidates[0][1])
        unknown.update(missing)
        ambiguous.update(unresolved)
        if missing and unresolved:
            dropped["gold name not in the catalog and another shared by servers"] += 1
        elif missing:
            dropped["gold name not in the catalog"] += 1
        elif unresolved:
            dropped["gold name shared by servers, annotation names none"] += 1
        if missing or unresolved or not needed:
            continue
        queries.append({"id": task["task_id"], "query": task["Question"]})
        gold.append({"id": task["task_id"], "tools": needed})

    write_set(here, tools, queries, gold)

    print(f"{len(ids)} servers, {len(tools)} tools, {len(tasks)} tasks")
    print(f"kept {len(queries)} queries ({sum(len(g['tools']) for g in gold)} gold tools)")
    for reason, count in sorted(dropped.items()):
        print(f"dropped {count}: {reason}")
    print("gold names not in the catalog:", dict(sorted(unknown.items())))
    print("shared gold names left unresolved:", dict(sorted(ambiguous.items())))
    for task_id, bare, full, evidence in hinted:
        print(f"resolved by the annotation: {task_id} {bare} -> {full} (words {evidence})")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_UPSTREAM)
