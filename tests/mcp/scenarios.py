"""Drives `quiver serve` with the official MCP Python SDK, as an MCP client would.

Run by tests/tests/mcp.rs: `python3 scenarios.py SCENARIO`, with QUIVER_BIN (the binary) and
QUIVER_SERVE_ARGS (a JSON list: `serve --mode … --config … --plugins …`) in the environment. Each
scenario prints one JSON object of what the client saw on the last line of stdout; the Rust test
asserts on it. Anything unexpected (a protocol error, an exception) exits non-zero with a
traceback on stderr.
"""

import asyncio
import json
import os
import re
import sys
import time

try:
    import anyio
    import mcp.types as types
    from mcp import ClientSession, StdioServerParameters, stdio_client
except ImportError as error:  # the Rust test turns this exit code into its message
    print(f"the MCP Python SDK is missing ({error}); run `python3 -m pip install mcp`", file=sys.stderr)
    sys.exit(3)

NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
ISSUE = {"owner": "octocat", "repo": "Hello-World", "number": 1347}


def wire(model):
    """A result as it travelled: camelCase keys, no empty fields."""
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def text_of(result):
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


class Client:
    """One connection: the session plus what the server sent besides replies."""

    def __init__(self):
        self.list_changed = 0
        # What the user answers to each confirmation, in order; what they were shown.
        self.answers = []
        self.asked = []

    async def on_elicit(self, context, params):
        self.asked.append({"message": params.message, "schema": params.requested_schema})
        answer = self.answers.pop(0)
        if answer == "decline":
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"confirm": answer == "accept"})

    async def on_message(self, message):
        if isinstance(message, types.ToolListChangedNotification):
            self.list_changed += 1

    async def tool_names(self, session):
        return [t.name for t in (await session.list_tools()).tools]


async def run(scenario):
    params = StdioServerParameters(
        command=os.environ["QUIVER_BIN"],
        args=json.loads(os.environ["QUIVER_SERVE_ARGS"]),
        env=dict(os.environ),
    )
    client = Client()
    async with stdio_client(params) as (read, write):
        # Only the scenarios about asking the user declare that this client can.
        elicit = client.on_elicit if scenario.startswith("ask") else None
        async with ClientSession(
            read, write, message_handler=client.on_message, elicitation_callback=elicit
        ) as session:
            init = await session.initialize()
            seen = {
                "server": init.server_info.name,
                "instructions": init.instructions or "",
                "list_changed_capability": bool(
                    init.capabilities.tools and init.capabilities.tools.list_changed
                ),
            }
            seen.update(await SCENARIOS[scenario](session, client))
            seen["list_changed"] = client.list_changed
    return seen


async def scenario_all(session, client):
    tools = [wire(t) for t in (await session.list_tools()).tools]
    by_name = {t["name"]: t for t in tools}
    result = await session.call_tool("github_get_issue", ISSUE)
    # The SDK checks every structuredContent against the tool's outputSchema: a repeat (served
    # from the cache) must conform as the first answer did.
    repeat = await session.call_tool("github_get_issue", ISSUE)
    # As the MCP Inspector's CLI sends them: every argument a string.
    stringly = await session.call_tool("github_get_issue", {k: str(v) for k, v in ISSUE.items()})
    return {
        "repeat_error": bool(repeat.is_error),
        "repeat_structured": repeat.structured_content,
        "repeat_text": text_of(repeat),
        "stringly_error": bool(stringly.is_error),
        "stringly_text": text_of(stringly),
        "stringly_structured": stringly.structured_content,
        "names": [t["name"] for t in tools],
        "names_valid": all(NAME.match(t["name"]) for t in tools),
        "get_issue": by_name.get("github_get_issue"),
        "create_issue": by_name.get("github_create_issue"),
        "is_error": bool(result.is_error),
        "structured": result.structured_content,
        "text": text_of(result),
    }


async def scenario_search(session, client):
    listed = await client.tool_names(session)
    found = await session.call_tool("find_tools", {"query": "get one github issue by its number", "k": 5})
    found_names = [t["name"] for t in json.loads(text_of(found))["tools"]]
    via_call_tool = await session.call_tool(
        "call_tool", {"name": "github_get_issue", "arguments": ISSUE}
    )
    listed_after = await client.tool_names(session)
    return {
        "listed": listed,
        "found": found_names,
        "call_tool_error": bool(via_call_tool.is_error),
        "call_tool_text": text_of(via_call_tool),
        "listed_after": listed_after,
    }


async def scenario_dynamic(session, client):
    listed = await client.tool_names(session)
    # free recovery: the tool is not listed, and the call still runs
    recovered = await session.call_tool("github_get_issue", ISSUE)
    # the notification travels beside the reply; give it a moment to arrive
    for _ in range(50):
        if client.list_changed:
            break
        await anyio.sleep(0.05)
    changed_after_call = client.list_changed
    listed_after_call = await client.tool_names(session)
    loaded = await session.call_tool("load_tools", {"bundle_or_tool": "github.issues"})
    for _ in range(50):
        if client.list_changed > changed_after_call:
            break
        await anyio.sleep(0.05)
    listed_after = await client.tool_names(session)
    misspelt = await session.call_tool("load_tools", {"bundle_or_tool": "githb.isues"})
    unknown = await session.call_tool("load_tools", {"bundle_or_tool": "zzzz qqqq"})
    return {
        "listed": listed,
        "recovered_error": bool(recovered.is_error),
        "recovered_text": text_of(recovered),
        "changed_after_call": changed_after_call,
        "listed_after_call": listed_after_call,
        "loaded": json.loads(text_of(loaded)),
        "listed_after": listed_after,
        "misspelt_error": bool(misspelt.is_error),
        "misspelt_text": text_of(misspelt),
        "unknown_error": bool(unknown.is_error),
        "unknown_text": text_of(unknown),
    }


async def scenario_cancel(session, client):
    progress = []

    async def on_progress(value, total, message):
        progress.append({"progress": value, "message": message})

    started = time.monotonic()
    with anyio.move_on_after(2.5) as scope:
        await session.call_tool(
            "github_get_issue",
            {"owner": "octocat", "repo": "Hello-World", "number": 1},
            progress_callback=on_progress,
        )
    cancelled_after = time.monotonic() - started
    # the server keeps serving: a fast call right after
    started = time.monotonic()
    after = await session.call_tool("github_get_issue", ISSUE)
    return {
        "cancelled": scope.cancelled_caught,
        "cancelled_after_s": cancelled_after,
        "progress": progress,
        "after_error": bool(after.is_error),
        "after_s": time.monotonic() - started,
        "after_text": text_of(after),
    }


async def scenario_read_only(session, client):
    tools = [wire(t) for t in (await session.list_tools()).tools]
    refused = await session.call_tool(
        "github_create_issue", {"owner": "octocat", "repo": "Hello-World", "title": "x"}
    )
    return {
        "names": [t["name"] for t in tools],
        "all_read_only": all(t.get("annotations", {}).get("readOnlyHint") for t in tools),
        "refused_error": bool(refused.is_error),
        "refused_text": text_of(refused),
    }


async def scenario_confirm(session, client):
    tools = {t.name: wire(t) for t in (await session.list_tools()).tools}
    args = {"owner": "octocat", "repo": "Hello-World", "title": "Found a bug"}
    first = await session.call_tool("github_create_issue", args)
    second = await session.call_tool("github_create_issue", {**args, "_confirm": True})
    return {
        "schema": tools["github_create_issue"]["inputSchema"],
        "first_error": bool(first.is_error),
        "first_text": text_of(first),
        "second_error": bool(second.is_error),
        "second_text": text_of(second),
        "second_structured": second.structured_content,
    }


async def scenario_ask_to_confirm(session, client):
    args = {"owner": "octocat", "repo": "Hello-World", "title": "Found a bug"}
    client.answers = ["decline", "accept", "untick"]
    # The model claims the user agreed; the user, asked, declines.
    forged = await session.call_tool("github_create_issue", {**args, "_confirm": True})
    accepted = await session.call_tool("github_create_issue", args)
    unticked = await session.call_tool("github_create_issue", args)
    return {
        "forged_error": bool(forged.is_error),
        "forged_text": text_of(forged),
        "accepted_error": bool(accepted.is_error),
        "accepted_text": text_of(accepted),
        "accepted_structured": accepted.structured_content,
        "unticked_error": bool(unticked.is_error),
        "unticked_text": text_of(unticked),
        "asked": client.asked,
    }


async def scenario_tokens(session, client):
    result = await session.list_tools()
    return {"tools_list": wire(result)}


SCENARIOS = {
    "all": scenario_all,
    "search": scenario_search,
    "dynamic": scenario_dynamic,
    "cancel": scenario_cancel,
    "read_only": scenario_read_only,
    "confirm": scenario_confirm,
    "ask_to_confirm": scenario_ask_to_confirm,
    "tokens": scenario_tokens,
}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in SCENARIOS:
        sys.exit(f"usage: scenarios.py {{{','.join(SCENARIOS)}}}")
    print(json.dumps(asyncio.run(run(sys.argv[1]))))
