#!/usr/bin/env python3
"""Prints what Claude Code shows a model of sshmcp: the server instructions and, per tool, its
name, description and input schema (no output schemas), each cut at 2,048 bytes as that client
cuts them. For a blind grading of the tools (docs/tools.md, "Grades").

usage: scripts/agent-view.py [SHIM] > view.json   (SHIM: default target/debug/sshmcp-mcp)
No daemon is started: tools/list needs none.
"""
import json
import os
import subprocess
import sys
import tempfile

shim = sys.argv[1] if len(sys.argv) > 1 else "target/debug/sshmcp-mcp"
with tempfile.TemporaryDirectory() as runtime:
    env = dict(os.environ, SSHMCP_RUNTIME_DIR=runtime,
               SSHMCP_LOCAL_ROOT="/home/you/sshmcp-files")
    p = subprocess.Popen([shim], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                         text=True)

    def send(message):
        p.stdin.write(json.dumps(message) + "\n")
        p.stdin.flush()

    send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
          "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                     "clientInfo": {"name": "agent-view", "version": "0"}}})
    init = json.loads(p.stdout.readline())
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    tools = json.loads(p.stdout.readline())["result"]["tools"]
    p.stdin.close()
    p.wait()


def cut(text):
    return text.encode()[:2048].decode(errors="ignore")


json.dump({"instructions": cut(init["result"]["instructions"]),
           "tools": [{"name": t["name"], "description": cut(t["description"]),
                      "inputSchema": t["inputSchema"]} for t in tools]},
          sys.stdout, indent=1)
print()
