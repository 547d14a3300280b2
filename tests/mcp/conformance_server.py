"""The server the MCP conformance suite's server scenarios describe, on the official Python SDK.

quiver's conformance tests (tests/tests/conformance.rs) run the suite
(`@modelcontextprotocol/conformance`) against this server directly, then against quiver fronting
it, and compare scenario by scenario. Every tool, resource and prompt here is one a scenario names,
with the content its description asks for; and two tools more: `touch_watched_resource` tells
subscribers that `test://watched-resource` changed, `add_prompt` adds a prompt and says so.

Run as `python3 conformance_server.py stdio` (an `[[upstreams]]` command) or
`python3 conformance_server.py http PORT` (Streamable HTTP on 127.0.0.1:PORT at `/mcp`).
"""

import asyncio
import json
import sys

from mcp.server import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import Prompt, UserMessage
from mcp.types import (
    AudioContent,
    Completion,
    CreateMessageRequest,
    CreateMessageRequestParams,
    ElicitRequest,
    ElicitRequestFormParams,
    EmbeddedResource,
    EmptyResult,
    ImageContent,
    InputRequiredResult,
    PromptReference,
    SamplingMessage,
    SetLevelRequestParams,
    SubscribeRequestParams,
    TextContent,
    TextResourceContents,
    UnsubscribeRequestParams,
)

# A 1x1 PNG and the shortest valid WAV: content a client can decode, as the scenarios ask.
PIXEL_PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
SILENT_WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

server = MCPServer("quiver-conformance-upstream", version="1.0.0")
subscribed: set[str] = set()


# --- tools -----------------------------------------------------------------------------------


@server.tool()
def test_simple_text() -> str:
    """Returns one text block."""
    return "This is a simple text response for testing."


@server.tool()
def test_image_content() -> list[ImageContent]:
    """Returns one PNG image block."""
    return [ImageContent(type="image", data=PIXEL_PNG, mime_type="image/png")]


@server.tool()
def test_audio_content() -> list[AudioContent]:
    """Returns one WAV audio block."""
    return [AudioContent(type="audio", data=SILENT_WAV, mime_type="audio/wav")]


def embedded(uri: str, mime_type: str, text: str) -> EmbeddedResource:
    return EmbeddedResource(
        type="resource", resource=TextResourceContents(uri=uri, mime_type=mime_type, text=text)
    )


@server.tool()
def test_embedded_resource() -> list[EmbeddedResource]:
    """Returns one embedded text resource."""
    return [embedded("test://embedded-resource", "text/plain", "This is an embedded resource content.")]


@server.tool()
def test_multiple_content_types() -> list[TextContent | ImageContent | EmbeddedResource]:
    """Returns a text, an image and an embedded resource block."""
    return [
        TextContent(type="text", text="Multiple content types test:"),
        ImageContent(type="image", data=PIXEL_PNG, mime_type="image/png"),
        embedded("test://mixed-content-resource", "application/json", json.dumps({"test": "data", "value": 123})),
    ]


@server.tool()
async def test_tool_with_logging(ctx: Context) -> str:
    """Sends three info log messages while it runs."""
    for i, text in enumerate(["Tool execution started", "Tool processing data", "Tool execution completed"]):
        if i:
            await asyncio.sleep(0.05)
        await ctx.session.send_log_message("info", text, related_request_id=ctx.request_id)
    return "Logged three messages."


@server.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress 0, 50 and 100 of 100 while it runs."""
    for step in (0, 50, 100):
        if step:
            await asyncio.sleep(0.05)
        await ctx.report_progress(step, 100)
    return "Progress reported."


@server.tool()
def test_error_handling() -> str:
    """Always fails."""
    raise RuntimeError("This tool intentionally returns an error for testing")


def stateless(ctx: Context) -> bool:
    """Whether the client speaks 2026-07-28, where a server asks for input by answering the call
    with `input_required` and is called again with the answers (SEP-2322)."""
    return (ctx.protocol_version or "") >= "2026-07-28"


@server.tool()
async def test_sampling(prompt: str, ctx: Context) -> str | InputRequiredResult:
    """Asks the client's model to complete the prompt."""
    messages = [SamplingMessage(role="user", content=TextContent(type="text", text=prompt))]
    if stateless(ctx):
        answer = (ctx.input_responses or {}).get("completion")
        if answer is None:
            request = CreateMessageRequest(params=CreateMessageRequestParams(messages=messages, max_tokens=100))
            return InputRequiredResult(input_requests={"completion": request})
    else:
        answer = await ctx.session.create_message(
            messages=messages, max_tokens=100, related_request_id=ctx.request_id
        )
    text = answer.content.text if answer.content.type == "text" else f"({answer.content.type})"
    return f"LLM response: {text}"


async def elicit(ctx: Context, message: str, schema: dict, label: str) -> str | InputRequiredResult:
    if stateless(ctx):
        answer = (ctx.input_responses or {}).get("form")
        if answer is None:
            request = ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))
            return InputRequiredResult(input_requests={"form": request})
    else:
        answer = await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
    return f"{label}: action={answer.action}, content={json.dumps(answer.content or {})}"


@server.tool()
async def test_elicitation(message: str, ctx: Context) -> str | InputRequiredResult:
    """Asks the user for a username and an email address."""
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    return await elicit(ctx, message, schema, "User response")


@server.tool()
async def test_elicitation_sep1034_defaults(ctx: Context) -> str | InputRequiredResult:
    """Asks the user for fields of every primitive type, each with a default."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "default": True},
        },
    }
    return await elicit(ctx, "Please review your details", schema, "Elicitation completed")


@server.tool()
async def test_elicitation_sep1330_enums(ctx: Context) -> str | InputRequiredResult:
    """Asks the user to choose with each of the five enum forms."""
    titled = [{"const": f"value{i}", "title": t} for i, t in enumerate(["First", "Second", "Third"], 1)]
    options = ["option1", "option2", "option3"]
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": options},
            "titledSingle": {"type": "string", "oneOf": titled},
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": options}},
            "titledMulti": {"type": "array", "items": {"anyOf": titled}},
        },
    }
    return await elicit(ctx, "Please choose", schema, "Elicitation completed")


@server.tool()
def test_dynamic_tool() -> str:
    """A tool a client may see come and go."""
    return "Dynamic tool answered."


# --- resources -------------------------------------------------------------------------------


@server.resource("test://static-text", name="static-text", description="A fixed text.", mime_type="text/plain")
def static_text() -> str:
    return "This is the content of the static text resource."


@server.resource("test://static-binary", name="static-binary", description="A 1x1 PNG.", mime_type="image/png")
def static_binary() -> bytes:
    import base64

    return base64.b64decode(PIXEL_PNG)


@server.resource(
    "test://template/{id}/data", name="template-data", description="Data for an id.", mime_type="application/json"
)
def template_data(id: str) -> str:
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@server.resource(
    "test://watched-resource", name="watched-resource", description="A text a client may subscribe to.",
    mime_type="text/plain",
)
def watched_resource() -> str:
    return "Watched resource content"


@server.tool()
async def touch_watched_resource(ctx: Context) -> str:
    """Changes test://watched-resource and tells the clients subscribed to it."""
    if stateless(ctx):
        await ctx.notify_resource_updated("test://watched-resource")
    elif "test://watched-resource" in subscribed:
        await ctx.session.send_resource_updated("test://watched-resource")
    return "Touched test://watched-resource."


@server.tool()
async def add_prompt(name: str, ctx: Context) -> str:
    """Adds a prompt called `name` and tells clients the list of prompts changed."""

    def added() -> list[UserMessage]:
        return [UserMessage(f"The prompt {name}.")]

    server.add_prompt(Prompt.from_function(added, name=name, description=f"Added: {name}."))
    if stateless(ctx):
        await ctx.notify_prompts_changed()
    else:
        await ctx.session.send_prompt_list_changed()
    return f"Added {name}."


async def subscribe(ctx: ServerRequestContext, params: SubscribeRequestParams) -> EmptyResult:
    subscribed.add(str(params.uri))
    return EmptyResult()


async def unsubscribe(ctx: ServerRequestContext, params: UnsubscribeRequestParams) -> EmptyResult:
    subscribed.discard(str(params.uri))
    return EmptyResult()


async def set_level(ctx: ServerRequestContext, params: SetLevelRequestParams) -> EmptyResult:
    return EmptyResult()


# The high-level server has no decorators for these three requests; the scenarios need them.
server._lowlevel_server.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
server._lowlevel_server.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)
server._lowlevel_server.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)


# --- prompts ---------------------------------------------------------------------------------


@server.prompt()
def test_simple_prompt() -> list[UserMessage]:
    """A prompt without arguments."""
    return [UserMessage("This is a simple prompt for testing.")]


@server.prompt()
def test_prompt_with_arguments(arg1: str, arg2: str) -> list[UserMessage]:
    """A prompt with two arguments."""
    return [UserMessage(f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'")]


@server.prompt()
def test_prompt_with_embedded_resource(resourceUri: str) -> list[UserMessage]:
    """A prompt embedding the resource it is given."""
    return [
        UserMessage(embedded(resourceUri, "text/plain", "Embedded resource content for testing.")),
        UserMessage("Please process the embedded resource above."),
    ]


@server.prompt()
def test_prompt_with_image() -> list[UserMessage]:
    """A prompt holding an image."""
    return [
        UserMessage(ImageContent(type="image", data=PIXEL_PNG, mime_type="image/png")),
        UserMessage("Please analyze the image above."),
    ]


@server.completion()
async def complete(ref, argument, context) -> Completion:
    if isinstance(ref, PromptReference) and argument.name == "arg1":
        values = [v for v in ["paris", "park", "party"] if v.startswith(argument.value)]
        return Completion(values=values, total=len(values), has_more=False)
    return Completion(values=[])


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        import uvicorn

        uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
    else:
        server.run("stdio")
