#!/usr/bin/env python3
"""An agent working beside the person's CLI, through the official Python MCP SDK: it connects
(`testbed`), then runs one `exec` of COMMAND and waits for its answer, which the person may cut
short (`sshmcp kill`).

usage: sdk_agent.py COMMAND -- SERVER_CMD [ARGS...]
The server inherits this process's environment (the test points it at its own daemon).
Prints one JSON line as soon as it is connected: {"session_id"}; then one with the exec's
answer (structuredContent). Exit 0 when both came; 1 with the reason.
"""
import json
import os
import sys

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client


async def main(command, cmd):
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=dict(os.environ))
    with anyio.fail_after(120):
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                c = (await session.call_tool("connect", {"alias": "testbed"})).structured_content
                if not c or not c.get("ok"):
                    print(f"sdk_agent: connect: {c}", file=sys.stderr)
                    return 1
                print(json.dumps({"session_id": c["session_id"]}), flush=True)
                auth = {"session_id": c["session_id"], "session_key": c["session_key"]}
                r = await session.call_tool("exec", {**auth, "command": command, "timeout": 60})
                print(json.dumps(r.structured_content), flush=True)
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) < 3 or args[1] != "--":
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(anyio.run(main, args[0], args[2:]))
