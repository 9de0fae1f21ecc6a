#!/usr/bin/env python3
"""Drives sshmcp-mcp with the official Python MCP SDK (mcp 2.3.0), a client we did not write:
the handshake (`legacy`: initialize; `modern`: server/discover, then every request carries its
protocol version and client in `_meta`), tools/list, then every tool once against the test's
sshd, checking each answer.

usage: sdk_client.py WORK_NAME legacy|modern -- SERVER_CMD [ARGS...]
The server inherits this process's environment (the test points it at its own daemon).
Prints one JSON document: {"protocolVersion", "tools": [names listed], "called": [names]}.
Exit 0 when every listed tool was called and answered as expected; 1 with the reason.
"""
import json
import sys

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client


class Failed(Exception):
    pass


async def scenario(session, work):
    called = []

    async def call(tool, args, codes=()):
        """Calls `tool`; its answer must be ok, or fail with one of `codes`."""
        result = await session.call_tool(tool, args)
        answer = result.structured_content
        if answer is None:
            raise Failed(f"{tool}: no structuredContent")
        if json.loads(result.content[0].text) != answer:
            raise Failed(f"{tool}: text and structured content differ")
        if not answer.get("ok") and answer.get("error", {}).get("code") not in codes:
            raise Failed(f"{tool}: {json.dumps(answer)}")
        called.append(tool)
        return answer

    async def until_done(auth, operation_id):
        # transfer_status answers when the transfer ends.
        st = await call("transfer_status", {**auth, "operation_id": operation_id,
                                            "wait_seconds": 60})
        if st["state"] != "completed":
            raise Failed(f"transfer: {json.dumps(st)}")
        return st

    c = await call("connect", {"alias": "testbed"})
    auth = {"session_id": c["session_id"], "session_key": c["session_key"]}
    listed = await call("session_list", {})
    if listed["sessions"][0]["session_id"] != c["session_id"]:
        raise Failed("session_list lacks the session")
    # Lean answers: a complete UTF-8 stream is its text; a cut one an object. The SDK checks
    # each answer against the tool's output schema.
    r = await call("exec", {**auth, "command": "echo hi"})
    if (r["exit_code"], r.get("stdout")) != (0, "hi\n") or "stderr" in r:
        raise Failed(f"exec: {json.dumps(r)}")
    r = await call("exec", {**auth, "command": "seq 100000; printf '\\377' >&2"})
    if not (r["stdout"]["truncated"] and r["stderr"]["encoding"] == "base64"):
        raise Failed(f"exec: {json.dumps(r)}")
    # The test user has no sudo rights: a clear refusal is the expected answer.
    await call("sudo_exec", {**auth, "command": "true"},
               codes=("sudo_password_required", "sudo_not_allowed", "sudo_unavailable"))
    d = f"/tmp/sshmcp-sdk-{work}"
    await call("make_directory", {**auth, "path": d})
    await call("write_file", {**auth, "path": f"{d}/a.txt", "content": "hello\n"})
    await call("edit_file", {**auth, "path": f"{d}/a.txt", "old_text": "hello", "new_text": "world"})
    st = await call("stat", {**auth, "path": f"{d}/a.txt"})
    if st["size"] != 6:
        raise Failed(f"stat: {json.dumps(st)}")
    await call("list_directory", {**auth, "path": d})
    read = await call("read_file_range", {**auth, "path": f"{d}/a.txt", "length": 100})
    if read["data"] != "world\n":
        raise Failed(f"read_file_range: {json.dumps(read)}")
    host = await call("host_info", {**auth, "paths": [d]})
    if host["filesystems"][0]["path"] != d or "total_bytes" not in host["filesystems"][0]:
        raise Failed(f"host_info: {json.dumps(host)}")
    await call("copy_path", {**auth, "source": f"{d}/a.txt", "destination": f"{d}/b.txt"})
    await call("move_path", {**auth, "source": f"{d}/b.txt", "destination": f"{d}/c.txt"})
    h = await call("command_start", {**auth, "command": "sleep 30"})
    await call("command_status", {**auth, "handle_id": h["handle_id"]})
    q = await call("command_start", {**auth, "command": "echo quick"})
    done = await call("command_status", {**auth, "handle_id": q["handle_id"], "wait_seconds": 10})
    if (done["status"], done.get("stdout")) != ("completed", "quick\n"):
        raise Failed(f"command_status: {json.dumps(done)}")
    # An ended handle's binary stream stays an object with its offsets.
    b = await call("command_start", {**auth, "command": "printf '\\377'"})
    done = await call("command_status", {**auth, "handle_id": b["handle_id"], "wait_seconds": 10})
    if done["stdout"].get("encoding") != "base64" or "next_offset" not in done["stdout"]:
        raise Failed(f"command_status: {json.dumps(done)}")
    await call("command_list", auth)
    k = await call("command_kill", {**auth, "handle_id": h["handle_id"]})
    if k["result"] != "killed":
        raise Failed(f"command_kill: {json.dumps(k)}")
    t = await call("task_launch", {**auth, "command": "sleep 30"})
    await call("task_status", {**auth, "pid": t["pid"]})
    await call("task_kill", {**auth, "pid": t["pid"]})
    down = await call("download_start", {**auth, "remote_path": f"{d}/a.txt",
                                         "local_path": f"sdk-{work}.txt"})
    await until_done(auth, down["operation_id"])
    up = await call("upload_start", {**auth, "local_path": f"sdk-{work}.txt",
                                     "remote_path": f"{d}/up.txt"})
    await until_done(auth, up["operation_id"])
    await call("transfer_list", auth)
    await call("transfer_cancel", {**auth, "operation_id": up["operation_id"]})
    f = await call("forward_start", {**auth, "kind": "dynamic"})
    await call("forward_list", auth)
    await call("forward_stop", {**auth, "forward_id": f["forward_id"]})
    await call("remove_path", {**auth, "path": d, "recursive": True})
    await call("disconnect", {"session_id": c["session_id"]})
    return called


async def main(work, mode, cmd):
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=dict(__import__("os").environ))
    with anyio.fail_after(120):
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                if mode == "modern":
                    await session.discover()
                else:
                    await session.initialize()
                version = session.protocol_version
                tools = [t.name for t in (await session.list_tools()).tools]
                called = await scenario(session, work)
    missing = sorted(set(tools) - set(called))
    print(json.dumps({"protocolVersion": version, "tools": tools,
                      "called": sorted(set(called))}))
    if missing:
        print(f"sdk_client: tools never called: {missing}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) < 4 or args[1] not in ("legacy", "modern") or args[2] != "--":
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    try:
        sys.exit(anyio.run(main, args[0], args[1], args[3:]))
    except Failed as e:
        print(f"sdk_client: {e}", file=sys.stderr)
        sys.exit(1)
