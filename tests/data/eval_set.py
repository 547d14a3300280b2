"""The format of a tool-selection evaluation set in tests/data/NAME/, written in one place for
every converter: `tools.json` (an MCP tools/list result), `queries.jsonl` (`{"id", "query"}`
per line) and `gold.jsonl` (`{"id", "tools"}` per line), UTF-8, as `quiver select --gold` and
`cargo xtask select-table` read them."""

import json
from pathlib import Path


def write_set(here: Path, tools: list, queries: list, gold: list) -> None:
    """Writes the set's three files into `here`."""
    (here / "tools.json").write_text(
        json.dumps({"tools": tools}, indent=0, ensure_ascii=False) + "\n", encoding="utf-8")
    (here / "queries.jsonl").write_text(
        "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in queries), encoding="utf-8")
    (here / "gold.jsonl").write_text(
        "".join(json.dumps(g, ensure_ascii=False) + "\n" for g in gold), encoding="utf-8")
