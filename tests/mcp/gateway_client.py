"""The gateway's cost per call as its users see it: the official MCP Python SDK as client,
calling server-everything's `echo` through quiver over stdio and over Streamable HTTP, and
through a plain stdio-to-HTTP bridge (mcp-proxy, given as MCP_PROXY) for comparison, for
`tests/benches/gateway_cpu.rs`: `python3 gateway_client.py QUIVER CALLS [MCP_PROXY]`.

Prints one JSON line per transport: p50 and p90 latency (ms) and the gateway's CPU per call (ms,
user + system of its own process from /proc, over the timed calls only, after 20 warm-up calls).
"""

import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

QUIVER = sys.argv[1]
CALLS = int(sys.argv[2]) if len(sys.argv) > 2 else 500
MCP_PROXY = sys.argv[3] if len(sys.argv) > 3 else None
WORK = tempfile.mkdtemp()
CONFIG = os.path.join(WORK, "quiver.toml")
with open(CONFIG, "w") as f:
    f.write(
        '[[upstreams]]\nname = "everything"\ncommand = "npx"\n'
        'args = ["-y", "@modelcontextprotocol/server-everything"]\nstart_timeout_s = 180\n'
    )
PLUGINS = os.path.join(WORK, "plugins")
os.makedirs(PLUGINS)
ENV = dict(os.environ, QUIVER_DATA_DIR=os.path.join(WORK, "data"), QUIVER_PLUGINS=PLUGINS)


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def quiver_child(parent):
    """The quiver process the SDK's stdio client started (a child of this one)."""
    for task in os.listdir(f"/proc/{parent}/task"):
        for child in open(f"/proc/{parent}/task/{task}/children").read().split():
            cmdline = open(f"/proc/{child}/cmdline").read()
            if cmdline.startswith(QUIVER):
                return int(child)
    raise RuntimeError("the quiver process was not found")


async def timed(session, pid, transport, tool="everything_echo"):
    for i in range(20):
        await session.call_tool(tool, {"message": f"warm-up {i}"})
    before = cpu_seconds(pid)
    latencies = []
    for i in range(CALLS):
        started = time.perf_counter()
        result = await session.call_tool(tool, {"message": f"call {i}"})
        latencies.append((time.perf_counter() - started) * 1000)
        assert not result.is_error, result
    cpu = (cpu_seconds(pid) - before) * 1000 / CALLS
    latencies.sort()
    print(json.dumps({
        "transport": transport,
        "calls": CALLS,
        "p50_ms": round(statistics.median(latencies), 3),
        "p90_ms": round(latencies[int(CALLS * 0.9)], 3),
        "cpu_ms_per_call": round(cpu, 3),
    }), flush=True)


async def over_stdio():
    params = StdioServerParameters(command=QUIVER, args=["serve", "--config", CONFIG], env=ENV)
    async with stdio_client(params, errlog=open(os.devnull, "w")) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            await timed(session, quiver_child(os.getpid()), "stdio")


def free_port():
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


async def over_http_to(command, port, transport, tool):
    """Starts the HTTP gateway `command` on `port`, waits until it listens, times `tool`."""
    server = subprocess.Popen(command, env=ENV, stderr=subprocess.DEVNULL)
    try:
        while True:
            assert server.poll() is None, f"{command[0]} exited with {server.returncode}"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                await asyncio.sleep(0.05)
        async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                await timed(session, server.pid, transport, tool)
    finally:
        server.kill()
        server.wait()


async def over_http():
    port = free_port()
    command = [QUIVER, "serve", "--http", f"127.0.0.1:{port}", "--config", CONFIG]
    await over_http_to(command, port, "http", "everything_echo")


async def over_bridge():
    """server-everything behind mcp-proxy's Streamable HTTP: a bridge that only relays."""
    port = free_port()
    command = [MCP_PROXY, "--port", str(port), "--host", "127.0.0.1", "--",
               "npx", "-y", "@modelcontextprotocol/server-everything"]
    await over_http_to(command, port, "mcp-proxy", "echo")


asyncio.run(over_stdio())
asyncio.run(over_http())
if MCP_PROXY:
    asyncio.run(over_bridge())
