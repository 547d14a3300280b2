"""An MCP client over Streamable HTTP (official Python SDK), for quiver's HTTP server tests.

`python3 http_client.py URL KEY MODE CALLS`: connects to URL with `Authorization: Bearer KEY`
(none when KEY is empty) in MODE (`auto`: 2026-07-28 when the server speaks it; `legacy`:
`initialize` and a session), lists the tools, makes CALLS (a JSON list of [name, arguments]),
and prints one JSON object: the protocol revision, the tool names and each call's result.
An optional fifth argument, a JSON object, makes it a client that can answer a server:
`sampling` (the text its model answers), `elicit` (the form content its user accepts with),
`log_level` (the log messages it asks for, printed as `logs`).
An HTTP error is printed as {"error": "…", "status": N} with exit code 2.
"""

import asyncio
import json
import sys

from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp.types import CreateMessageResult, ElicitResult, TextContent


def text_of(result):
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def main():
    url, key, mode, calls = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    answers = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    http = create_mcp_http_client(headers=headers)
    out = {"calls": [], "logs": [], "asked": []}
    options = {}
    if "sampling" in answers:

        async def sampling(context, params):
            out["asked"].append("sampling")
            return CreateMessageResult(
                role="assistant", content=TextContent(type="text", text=answers["sampling"]), model="test"
            )

        options["sampling_callback"] = sampling
    if "elicit" in answers:

        async def elicitation(context, params):
            out["asked"].append(f"elicitation: {params.message}")
            return ElicitResult(action="accept", content=answers["elicit"])

        options["elicitation_callback"] = elicitation
    if "log_level" in answers:

        async def logged(params):
            out["logs"].append(str(params.data))

        options["logging_callback"] = logged
        options["log_level"] = answers["log_level"]
    async with Client(streamable_http_client(url, http_client=http), mode=mode, **options) as client:
        out["protocol"] = str(client.protocol_version)
        if "log_level" in answers and mode == "legacy":
            # Before 2026-07-28 a client asks for log messages with `logging/setLevel`.
            await client.set_logging_level(answers["log_level"])
        out["tools"] = [t.name for t in (await client.list_tools()).tools]
        for name, arguments in calls:
            result = await client.call_tool(name, arguments)
            out["calls"].append({"is_error": bool(result.is_error), "text": text_of(result)})
    print(json.dumps(out))


def status_of(error):
    """The HTTP status inside whatever the SDK raised, if there is one."""
    seen = [error]
    while seen:
        e = seen.pop()
        response = getattr(e, "response", None)
        if response is not None and getattr(response, "status_code", None):
            return response.status_code
        seen.extend(getattr(e, "exceptions", []) or [])
        if e.__cause__ is not None:
            seen.append(e.__cause__)
        if e.__context__ is not None:
            seen.append(e.__context__)
    return None


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except BaseException as error:  # an HTTP refusal arrives wrapped in task groups
        print(json.dumps({"error": repr(error)[:500], "status": status_of(error)}))
        sys.exit(2)
