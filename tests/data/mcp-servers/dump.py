"""Writes the tool lists of public MCP servers as their `tools/list` answers show them, one JSON
array per server, with the official Python MCP SDK as the client:

    python3 dump.py            # every server below, through `npx -y`

`github-mcp-server.json` comes instead from the definitions github/github-mcp-server keeps in its
repository (`pkg/github/__toolsnaps__/*.snap`, one tool per file), joined into one array:

    python3 dump.py --snaps DIR_OF_SNAP_FILES
"""

import asyncio
import glob
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

SERVERS = {
    "everything": ["@modelcontextprotocol/server-everything"],
    "filesystem": ["@modelcontextprotocol/server-filesystem", "/tmp"],
    "memory": ["@modelcontextprotocol/server-memory"],
    "sequential": ["@modelcontextprotocol/server-sequential-thinking"],
    "modelcontextprotocol-server-github": ["@modelcontextprotocol/server-github"],
    "postgres": ["@modelcontextprotocol/server-postgres", "postgresql://localhost/x"],
    "playwright": ["@playwright/mcp"],
    "context7": ["@upstash/context7-mcp"],
    "notion": ["@notionhq/notion-mcp-server"],
}


async def dump(name, args):
    params = StdioServerParameters(command="npx", args=["-y", *args])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = (await session.list_tools()).tools
            listed = [t.model_dump(by_alias=True, exclude_none=True) for t in tools]
            with open(f"{name}.json", "w") as out:
                json.dump(listed, out, indent=1, ensure_ascii=False)
            print(name, len(listed))


async def main():
    for name, args in SERVERS.items():
        await asyncio.wait_for(dump(name, args), 180)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--snaps"]:
        tools = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(sys.argv[2], "*.snap")))]
        with open("github-mcp-server.json", "w") as out:
            json.dump(tools, out, indent=1, ensure_ascii=False)
        print("github-mcp-server", len(tools))
    else:
        asyncio.run(main())
