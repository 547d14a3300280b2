"""Converts the Azure MCP Server's tool-selection test data (microsoft/mcp at commit
9675685c903a640f3120f5b077a75e50accc95fa: the server's tool listing and its end-to-end test
prompts) into the shapes `quiver select` reads: one tool catalog, the requests, and the tool each
needs.

Usage: python3 convert.py [UPSTREAM_DIR]  (default /tmp/mcp-datasets/azure-mcp; it holds
upstream's eng/tools/ToolDescriptionEvaluator/tools.json as tools.json and
servers/Azure.Mcp.Server/docs/e2eTestPrompts.md as e2eTestPrompts.md; writes tools.json,
queries.jsonl, gold.jsonl beside this script)

The catalog is upstream's `tools.json`, the answer of the server's `azmcp tools list` that
upstream's ToolDescriptionEvaluator reads in place of the server's MCP tools/list. Each entry is
one MCP tool of the server in its default ("all") mode, where the tool's MCP name is its command
with spaces made `_` (`acr registry list` -> `acr_registry_list`). Here each is named
`azure_` + that name, as a gateway prefixes a server's tools (SERVER is `azure`). The description
is upstream's as given. The listing gives each option's name, description, type and required flag,
not the inputSchema; the inputSchema is built from them as the server's
CommandFactoryToolLoader.GetTool builds it: one property per option, named as the option without
its leading dashes, `{"type", "description"}` as listed, and `required` the options marked
required. (The listing writes every type as "string", so the server's integer or boolean types
are lost; array `items` are not in the listing either.)

The requests are the rows of e2eTestPrompts.md's tables, `| tool name | test prompt |`, the
markdown escape `\\<` undone (as upstream's Generate-PromptsJsonFromMarkdown.ps1 does). A prompt's
gold is the tool its row names. A row is dropped when its tool is not in the listing, or when the
same tool already has the same prompt. A request's id is `azure-NNNN`, the kept prompts numbered
from 1 in file order (not the tool's name, which would give the answer away)."""
import collections
import json
import pathlib
import re
import sys

# The set's file format, shared by every converter in tests/data/.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from eval_set import write_set  # noqa: E402

DEFAULT_UPSTREAM = "/tmp/mcp-datasets/azure-mcp"
SERVER = "azure"
ROW = re.compile(r"^\|\s*([A-Za-z0-9_\-]+)\s*\|\s*(.*?)\s*\|\s*$")


def input_schema(options):
    properties, required = {}, []
    for option in options or []:
        name = option["name"].lstrip("-/")
        properties[name] = {"type": option["type"], "description": option["description"]}
        if option.get("required") is True:
            required.append(name)
    return {"type": "object", "properties": properties, "required": required}


def main(upstream):
    upstream = pathlib.Path(upstream)
    here = pathlib.Path(__file__).parent
    listing = json.loads((upstream / "tools.json").read_text(encoding="utf-8"))["results"]
    tools, names = [], set()
    for entry in listing:
        bare = entry["command"].replace(" ", "_")
        assert bare not in names, f"two tools named {bare}"
        names.add(bare)
        tools.append({
            "name": f"{SERVER}_{bare}",
            "description": entry["description"],
            "inputSchema": input_schema(entry.get("option")),
        })

    queries, gold = [], []
    dropped = collections.Counter()
    unknown = collections.Counter()
    seen = collections.defaultdict(list)
    rows = 0
    for line in (upstream / "e2eTestPrompts.md").read_text(encoding="utf-8").splitlines():
        match = ROW.match(line)
        if not match:
            continue
        bare, prompt = match.group(1), match.group(2).replace("\\<", "<").replace("\\>", ">")
        rows += 1
        if bare not in names:
            unknown[bare] += 1
            dropped["tool not in the listing"] += 1
            continue
        if prompt in seen[bare]:
            dropped["same prompt twice for the same tool"] += 1
            continue
        seen[bare].append(prompt)
        qid = f"{SERVER}-{len(queries) + 1:04d}"
        queries.append({"id": qid, "query": prompt})
        gold.append({"id": qid, "tools": [f"{SERVER}_{bare}"]})

    write_set(here, tools, queries, gold)

    covered = {g["tools"][0] for g in gold}
    print(f"{len(tools)} tools, {rows} prompt rows")
    print(f"kept {len(queries)} queries over {len(covered)} tools")
    for reason, count in sorted(dropped.items()):
        print(f"dropped {count}: {reason}")
    print("prompt tools not in the listing:", dict(sorted(unknown.items())))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_UPSTREAM)
