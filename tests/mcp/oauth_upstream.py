"""An MCP server (official Python SDK) that only answers callers with an OAuth access token, for
quiver's `auth = "oauth"` upstream tests: `python3 oauth_upstream.py PORT AUTH_SERVER_URL STATE_DIR`.

It is a resource server as the MCP authorization spec describes, with the SDK's own support:
the protected-resource metadata (RFC 9728) names AUTH_SERVER_URL, a request without a valid
token gets 401 with `WWW-Authenticate`, and a token is valid when the authorization server's
`/user` answers for it (the loopback service of `tests/src/oauth_service.rs`). Its tool `whoami`
returns the account the call's token is for; every verified token's account is appended to
STATE_DIR/accounts.log, so a test sees who each request acted as.
"""

import asyncio
import json
import os
import sys
import urllib.request

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer

PORT = int(sys.argv[1])
AUTH_SERVER = sys.argv[2]
STATE = sys.argv[3]
RESOURCE = f"http://127.0.0.1:{PORT}/mcp"


def account_of(token: str) -> str | None:
    request = urllib.request.Request(
        f"{AUTH_SERVER}/user", headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.load(answer).get("login")
    except Exception:
        return None


class Verifier:
    async def verify_token(self, token: str) -> AccessToken | None:
        account = await asyncio.to_thread(account_of, token)
        if account is None:
            return None
        with open(os.path.join(STATE, "accounts.log"), "a") as f:
            f.write(account + "\n")
        return AccessToken(
            token=token, client_id="any", scopes=["tracker"], subject=account, resource=RESOURCE
        )


server = MCPServer(
    "tracker",
    token_verifier=Verifier(),
    auth=AuthSettings(
        issuer_url=AUTH_SERVER,
        resource_server_url=RESOURCE,
        required_scopes=["tracker"],
        validate_token_resource=True,
    ),
)


@server.tool()
def whoami() -> str:
    """The account this call acts as."""
    token = get_access_token()
    return f"you are {token.subject if token else 'nobody'}"


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=PORT, log_level="warning")
