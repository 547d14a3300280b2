"""Converts StableToolBench's solvable test queries (ToolBench's RapidAPI tasks) into the shapes
`quiver select` reads: one pooled tool catalog, the queries, and the APIs each one needs.

Usage: python3 convert.py STABLETOOLBENCH_CHECKOUT  (writes tools.json, queries.jsonl, gold.jsonl
here)

Every API offered with any query joins one catalog, keyed by its RapidAPI tool and API name (the
first definition kept). An API becomes an MCP tool named `TOOL.API`, both parts reduced to
letters, digits and `_`, so the part before the dot groups a RapidAPI tool's endpoints the way a
provider groups its tools; its description is the API's, its input schema its required and
optional parameters. A query's gold set is its "relevant APIs"."""
import json
import pathlib
import re
import sys

GROUPS = ["G1_instruction", "G1_category", "G1_tool", "G2_instruction", "G2_category",
          "G3_instruction"]
TYPES = {"STRING": "string", "NUMBER": "number", "BOOLEAN": "boolean", "ARRAY": "array",
         "OBJECT": "object", "ENUM": "string"}


def part(text):
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_") or "_"


def name_of(tool, api):
    return f"{part(tool)}.{part(api)}"


def schema_of(api):
    properties, required = {}, []
    for kind in ("required_parameters", "optional_parameters"):
        for parameter in api.get(kind) or []:
            name = parameter["name"]
            prop = {"type": TYPES.get(str(parameter.get("type", "")).upper(), "string")}
            if parameter.get("description"):
                prop["description"] = parameter["description"]
            properties[name] = prop
            if kind == "required_parameters":
                required.append(name)
    schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def main(checkout):
    source = pathlib.Path(checkout) / "solvable_queries" / "test_instruction"
    here = pathlib.Path(__file__).parent
    tools, seen, queries, gold = [], {}, [], []
    for group in GROUPS:
        for query in json.loads((source / f"{group}.json").read_text()):
            offered = set()
            for api in query["api_list"]:
                key = (api["tool_name"], api["api_name"])
                name = name_of(*key)
                offered.add(name)
                if name in seen:
                    continue
                seen[name] = key
                tools.append({
                    "name": name,
                    "description": (api.get("api_description") or "").strip(),
                    "inputSchema": schema_of(api),
                })
            needed = sorted({name_of(tool, api) for tool, api in query["relevant APIs"]} & offered)
            if not needed:
                continue
            qid = f"{group}-{query['query_id']}"
            queries.append({"id": qid, "query": query["query"]})
            gold.append({"id": qid, "tools": needed})
    (here / "tools.json").write_text(json.dumps({"tools": tools}, indent=0) + "\n")
    (here / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (here / "gold.jsonl").write_text("".join(json.dumps(g) + "\n" for g in gold))
    print(f"{len(tools)} tools, {len(queries)} queries")


if __name__ == "__main__":
    main(sys.argv[1])
