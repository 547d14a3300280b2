"""Converts Arcade's toolkits and their evaluation suites (ArcadeAI/arcade-mcp at commit
27a6cd31a3fb381e5d6d071dc0497091ae6ec553, the last commit before the toolkits left that
repository) into the shapes `quiver select` reads: one tool catalog, the requests, and the tools
each needs.

Usage: python3 convert.py [UPSTREAM_DIR]  (default /tmp/mcp-datasets/arcade; it holds upstream's
toolkits/ folder at that commit, e.g. from
`git archive 27a6cd3 toolkits | tar -x -C UPSTREAM_DIR`; writes tools.json, queries.jsonl,
gold.jsonl beside this script). Nothing upstream is imported or run: the source is only parsed.

Toolkits: every folder of toolkits/ but the five that upstream's PR #438 split or renamed and
kept only for migration (Google, Microsoft, Search -> split toolkits; Web -> Firecrawl,
CodeSandbox -> E2B), whose tools and evaluation cases the new toolkits repeat.

Catalog: the tools are found as upstream finds them (arcade_core.parse: functions decorated with
`@tool` in the toolkit's package), and defined as arcade_core.catalog and arcade_tdk.tool define
them: the toolkit name is the package name less `arcade_` in PascalCase (`arcade_google_calendar`
-> `GoogleCalendar`), the tool name the decorator's `name` or the function name in PascalCase,
the description the decorator's `desc` or the cleaned docstring; a parameter is each argument but
the ToolContext one, named and described by its `Annotated[...]` strings, required when it is not
Optional and its default is absent or None (as arcade_core.catalog decides). Each tool is named `TOOLKIT_TOOL` (`Gmail_SendEmail`), the name
Arcade's MCP server (arcade_serve.mcp.convert) gives it, which is already SERVER_TOOL with the
toolkit as the server. The inputSchema's types are the JSON types of the annotations (str string,
int integer, float number, bool boolean, list array, dict/TypedDict object, an Enum or string
Literal a string with its values as `enum`); this is rebuilt from the source, not captured from a
running server.

Requests: each `suite.add_case(...)` of the kept toolkits' evals/ files whose `user_message` is a
plain string and that has no `additional_messages` (an earlier conversation the request depends
on); its gold is the tools its `expected_tool_calls` name (`ExpectedToolCall(func=f, ...)`, `f`
resolved through the file's imports to a tool of the catalog). A case is dropped when its message
is built at run time (f-string, variable), when it has history, when it expects no tool, when a
func does not resolve, or when an earlier case has the same message (counted when the gold
differs). A request's id is `arcade-NNNN`, the kept cases numbered in file order."""
import ast
import collections
import pathlib
import sys

# The set's file format, shared by every converter in tests/data/.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from eval_set import write_set  # noqa: E402

DEFAULT_UPSTREAM = "/tmp/mcp-datasets/arcade"
SUPERSEDED = {"google", "microsoft", "search", "web", "code_sandbox"}
SCALARS = {"str": "string", "int": "integer", "float": "number", "bool": "boolean",
           "list": "array", "List": "array", "dict": "object", "Dict": "object"}


def snake_to_pascal(name):
    if "_" in name:
        return "".join(x.capitalize() or "_" for x in name.split("_"))
    return name if name[0].isupper() else name.capitalize()


def is_tool(node):
    for dec in node.decorator_list:
        if isinstance(dec, ast.Name) and dec.id == "tool":
            return {}
        if isinstance(dec, ast.Attribute) and isinstance(dec.value, ast.Name) \
                and f"{dec.value.id}.{dec.attr}" == "arc.tool":
            return {}
        if isinstance(dec, ast.Call) and isinstance(dec.func, ast.Name) and dec.func.id == "tool":
            return {k.arg: k.value for k in dec.keywords}
    return None


def literal_str(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


class Package:
    """One toolkit's package: its tools, its enums and TypedDicts, read from the source."""

    def __init__(self, pkg_dir):
        self.module = pkg_dir.name
        self.toolkit = snake_to_pascal(self.module.removeprefix("arcade_"))
        self.enums, self.typeddicts, self.funcs = {}, set(), {}
        trees = [(p, ast.parse(p.read_text(encoding="utf-8"))) for p in sorted(pkg_dir.rglob("*.py"))]
        for _, tree in trees:
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    bases = {ast.unparse(b) for b in node.bases}
                    if bases & {"Enum", "str, Enum", "StrEnum", "enum.Enum"} or any("Enum" in b for b in bases):
                        values = [n.value.value for n in node.body if isinstance(n, ast.Assign)
                                  and isinstance(n.value, ast.Constant)]
                        self.enums[node.name] = values
                    if "TypedDict" in bases:
                        self.typeddicts.add(node.name)
        for _, tree in trees:
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    options = is_tool(node)
                    if options is not None:
                        assert node.name not in self.funcs, f"{self.module}: two tools {node.name}"
                        self.funcs[node.name] = self.define(node, options)

    def schema_type(self, ann):
        """JSON schema of a parameter's type annotation, and whether it is Optional."""
        optional = False
        if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
            parts = [ann.left, ann.right]
            kept = [p for p in parts if not (isinstance(p, ast.Constant) and p.value is None)]
            optional = len(kept) < len(parts)
            ann = kept[0]
        if isinstance(ann, ast.Subscript) and ast.unparse(ann.value) in ("Optional", "typing.Optional"):
            optional, ann = True, ann.slice
        if isinstance(ann, ast.Subscript) and ast.unparse(ann.value) in ("Union", "typing.Union"):
            elts = [e for e in ann.slice.elts if not (isinstance(e, ast.Constant) and e.value is None)]
            optional, ann = len(elts) < len(ann.slice.elts), elts[0]
        base = ann.value if isinstance(ann, ast.Subscript) else ann
        base_name = ast.unparse(base).split(".")[-1]
        if base_name == "Literal":
            elts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
            return {"type": "string", "enum": [e.value for e in elts]}, optional
        if base_name in ("list", "List") and isinstance(ann, ast.Subscript):
            inner, _ = self.schema_type(ann.slice)
            return {"type": "array", "items": inner}, optional
        if base_name in SCALARS:
            return {"type": SCALARS[base_name]}, optional
        if base_name in self.enums:
            return {"type": "string", "enum": self.enums[base_name]}, optional
        if base_name in self.typeddicts:
            return {"type": "object"}, optional
        return {"type": "string"}, optional

    def define(self, node, options):
        name = literal_str(options["name"]) if "name" in options else snake_to_pascal(node.name)
        desc = literal_str(options["desc"]) if "desc" in options else ast.get_docstring(node, clean=True)
        properties, required = {}, []
        args = node.args.args + node.args.kwonlyargs
        defaults = [None] * (len(node.args.args) - len(node.args.defaults)) + list(node.args.defaults) \
            + list(node.args.kw_defaults)
        for arg, default in zip(args, defaults):
            ann = arg.annotation
            if ann is None or ast.unparse(ann).split(".")[-1] == "ToolContext":
                continue
            pname, pdesc, typ = arg.arg, None, ann
            if isinstance(ann, ast.Subscript) and ast.unparse(ann.value).split(".")[-1] == "Annotated":
                elts = ann.slice.elts
                typ = elts[0]
                strings = [literal_str(e) for e in elts[1:] if literal_str(e) is not None]
                if len(strings) == 2:
                    pname, pdesc = strings
                elif len(strings) == 1:
                    pdesc = strings[0]
            schema, optional = self.schema_type(typ)
            prop = {"type": schema["type"]}
            if pdesc:
                prop["description"] = pdesc
            prop.update({k: v for k, v in schema.items() if k != "type"})
            properties[pname] = prop
            # arcade_core: required = not Optional and the default is absent or None
            if isinstance(default, ast.Call) and ast.unparse(default.func).split(".")[-1] == "Field":
                default = {k.arg: k.value for k in default.keywords}.get("default")
            none_default = default is None or (isinstance(default, ast.Constant) and default.value is None)
            if not optional and none_default:
                required.append(pname)
        schema = {"type": "object", "properties": properties}
        if required:
            schema["required"] = required
        return {"name": f"{self.toolkit}_{name}", "description": desc or "", "inputSchema": schema}


def main(upstream):
    root = pathlib.Path(upstream) / "toolkits"
    here = pathlib.Path(__file__).parent
    packages, skipped = {}, []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        if folder.name in SUPERSEDED:
            skipped.append(folder.name)
            continue
        pkg_dirs = [p for p in folder.iterdir() if p.is_dir() and p.name.startswith("arcade_")]
        assert len(pkg_dirs) == 1, folder
        package = Package(pkg_dirs[0])
        if package.funcs:
            packages[package.module] = package
    tools = [t for p in packages.values() for t in p.funcs.values()]
    assert len({t["name"] for t in tools}) == len(tools), "tool names are not unique"

    queries, gold, messages = [], [], {}
    dropped = collections.Counter()
    cases = 0
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and p.name not in SUPERSEDED):
        for path in sorted((folder / "evals").glob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            imported = {}
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module:
                    for alias in node.names:
                        imported[alias.asname or alias.name] = (node.module.split(".")[0], alias.name)
            calls = sorted((node for node in ast.walk(tree) if isinstance(node, ast.Call)
                            and isinstance(node.func, ast.Attribute) and node.func.attr == "add_case"),
                           key=lambda node: (node.lineno, node.col_offset))
            for node in calls:
                cases += 1
                kw = {k.arg: k.value for k in node.keywords}
                message = literal_str(kw.get("user_message"))
                if message is None:
                    dropped["message built at run time"] += 1
                    continue
                extra = kw.get("additional_messages")
                if extra is not None and not (isinstance(extra, ast.List) and not extra.elts):
                    dropped["depends on earlier messages (additional_messages)"] += 1
                    continue
                expected = kw.get("expected_tool_calls")
                names, unresolved = [], False
                for call in getattr(expected, "elts", []):
                    func = {k.arg: k.value for k in call.keywords}.get("func") if isinstance(call, ast.Call) else None
                    ref = ast.unparse(func).split(".")[-1] if func is not None else None
                    module, fname = imported.get(ref, (None, ref))
                    package = packages.get(module)
                    if package is None or fname not in package.funcs:
                        unresolved = True
                        continue
                    names.append(package.funcs[fname]["name"])
                names = list(dict.fromkeys(names))
                if unresolved:
                    dropped["an expected tool does not resolve"] += 1
                    print(f"unresolved: {path.relative_to(root)}:{node.lineno} {ast.unparse(expected)[:120]}")
                    continue
                if not names:
                    dropped["expects no tool call"] += 1
                    continue
                if message in messages:
                    same = messages[message] == names
                    dropped["same message as an earlier case" + ("" if same else ", other gold")] += 1
                    continue
                messages[message] = names
                qid = f"arcade-{len(queries) + 1:04d}"
                queries.append({"id": qid, "query": message})
                gold.append({"id": qid, "tools": names})

    write_set(here, tools, queries, gold)

    print(f"skipped superseded toolkits: {', '.join(skipped)}")
    print(f"{len(packages)} toolkits, {len(tools)} tools, {cases} evaluation cases")
    print(f"kept {len(queries)} queries ({sum(len(g['tools']) > 1 for g in gold)} need more than one tool), "
          f"over {len({t for g in gold for t in g['tools']})} tools of "
          f"{len({t.split('_')[0] for g in gold for t in g['tools']})} toolkits")
    for reason, count in sorted(dropped.items()):
        print(f"dropped {count}: {reason}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_UPSTREAM)
