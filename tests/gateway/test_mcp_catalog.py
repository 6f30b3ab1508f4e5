"""What the model is offered of a server's tool list, and what it reads of a call's result (SDK types in, ours out)."""

from __future__ import annotations

import base64
from typing import Any

import mcp.types as types
from structlog.testing import capture_logs

from agent.tools import ToolImage
from agent.tools.registry import TOOL_NAME
from config.tools import McpServer
from gateway.tools.mcp.catalog import offered
from gateway.tools.mcp.results import convert
from tests.fakes.mcp_server import PICTURE

OBJECT = {"type": "object", "properties": {"q": {"type": "string"}}}


def tool(name: str, schema: Any = OBJECT, description: str | None = "Does things.") -> types.Tool:
    return types.Tool(name=name, input_schema=schema, description=description)


def server(**options: Any) -> McpServer:
    return McpServer(name="github", command="github-mcp", **options)


def test_names_are_namespaced_cleaned_and_kept_to_64_distinct_characters() -> None:
    long = "search_" + "x" * 80
    tools = offered(server(), [tool("search"), tool("repo.read"), tool("repo/read"), tool(long), tool(long + "y")])
    names = [each.name for each in tools]
    assert names[0] == "github__search"
    assert names[1] != names[2] and all(name.startswith("github__repo_read_") for name in names[1:3])
    assert all(TOOL_NAME.match(name) and len(name) <= 64 for name in names) and len(set(names)) == 5
    assert [each.remote for each in tools] == ["search", "repo.read", "repo/read", long, long + "y"]
    again = offered(server(), [tool("repo/read"), tool("repo.read")])  # the same names whatever the order
    assert {each.remote: each.name for each in again} == {each.remote: each.name for each in tools[1:3]}


def test_a_tool_whose_schema_is_not_an_object_schema_is_left_out_and_logged() -> None:
    bad = [tool("scalar", {"type": "string"}), tool("broken", {"type": "object", "properties": {"q": {"type": 7}}})]
    with capture_logs() as logs:
        tools = offered(server(), [*bad, tool("fine", description=None)])
    assert [each.name for each in tools] == ["github__fine"]
    assert tools[0].description == "The fine tool of the github server."
    rejected = {line["tool"]: line["reason"] for line in logs if line["event"] == "mcp.tool.rejected"}
    assert rejected["scalar"] == "its input schema describes 'string', not an object of arguments"
    assert rejected["broken"].startswith("its input schema is not valid JSON Schema")


def test_include_and_exclude_filter_by_the_tools_own_names() -> None:
    tools = [tool("search_issues"), tool("search_code"), tool("delete_repo")]
    chosen = offered(server(include=["search_*"], exclude=["search_code"]), tools)
    assert [each.remote for each in chosen] == ["search_issues"]


def test_results_keep_text_pictures_and_resources_and_name_what_the_model_cannot_read() -> None:
    png = base64.b64encode(PICTURE).decode()
    result = types.CallToolResult(content=[
        types.TextContent(type="text", text="two things:"),
        types.ImageContent(type="image", data=png, mime_type="image/png"),
        types.ImageContent(type="image", data=png, mime_type="image/tiff"),
        types.AudioContent(type="audio", data=png, mime_type="audio/wav"),
        types.EmbeddedResource(type="resource", resource=types.BlobResourceContents(
            uri="file:///a.bin", blob=png, mime_type="application/zip")),
        types.ResourceLink(type="resource_link", uri="https://example.org/r/1", name="r1", description="the report"),
    ])  # fmt: skip
    converted = convert(result, budget=10_000)
    assert converted.images == (ToolImage(PICTURE, "image/png"),) and not converted.is_error
    assert converted.text.splitlines() == [
        "two things:",
        "[a picture of type image/tiff that cannot be shown here]",
        "[an audio clip of type audio/wav that cannot be played here]",
        "[resource file:///a.bin: application/zip that cannot be shown here]",
        "[resource https://example.org/r/1: the report]",
    ]


def test_structured_content_stands_in_for_missing_text_and_errors_say_so() -> None:
    assert convert(types.CallToolResult(content=[], structured_content={"n": 1}), 1000).text == '{\n "n": 1\n}'
    failed = convert(types.CallToolResult(content=[], is_error=True), 1000)
    assert failed.is_error and failed.text == "(the tool failed without saying why)"
