"""Run one cell in a learner's kernel through the hub, as their browser does: the kernel's websocket (protocol v1).

The hub's tests (tests/hub/test_hub.py) and the class-arrival benchmark (benchmarks/class_arrival.py) both speak to
kernels this way, through the proxy, with the learner's cookies and their subdomain as the origin.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
import uuid

#: the kernel websocket's subprotocol (jupyter_server's v1 framing)
V1 = "v1.kernel.websocket.jupyter.org"


async def execute(url: str, cookies: str, origin: str, user: str, code: str, timeout: float) -> dict:
    """Send ``code`` as one execute request on the kernel websocket at ``url`` and gather what comes of it.

    Returns ``{"reply": status or None, "stdout": str, "stderr": str, "restarting": bool}``: the execute reply's
    status, the request's streams (an error's name and value added to stderr), and whether the kernel restarted.
    The outputs end with the request's idle status on iopub, which may come after its reply; a reply with no idle
    status within 5 s ends the wait, and so does a restart that says it met its memory limit.
    """
    from jupyter_server.services.kernels.connection.base import deserialize_msg_from_ws_v1, serialize_msg_to_ws_v1
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    ws = await websocket_connect(HTTPRequest(url, headers={"Cookie": cookies, "Origin": origin},
                                             connect_timeout=timeout, request_timeout=timeout), subprotocols=[V1])
    msg_id = uuid.uuid4().hex
    header = {"msg_id": msg_id, "msg_type": "execute_request", "username": user, "session": uuid.uuid4().hex,
              "version": "5.3", "date": dt.datetime.now(dt.timezone.utc).isoformat()}
    content = {"code": code, "silent": False, "store_history": True, "user_expressions": {}, "allow_stdin": False,
               "stop_on_error": True}
    await ws.write_message(serialize_msg_to_ws_v1([json.dumps(x).encode() for x in (header, {}, {}, content)],
                                                  "shell"), binary=True)
    out = {"reply": None, "stdout": "", "stderr": "", "restarting": False}
    deadline = time.monotonic() + timeout
    idle = False
    try:
        while time.monotonic() < deadline:
            try:
                raw = await asyncio.wait_for(ws.read_message(), 5)
            except asyncio.TimeoutError:
                if out["reply"] is not None:
                    break  # a reply, and no idle status within 5 s: what came is all that will
                continue
            if raw is None:
                break
            _, parts = deserialize_msg_from_ws_v1(raw)
            head, parent, _, body = (json.loads(p) for p in parts[:4])
            if head["msg_type"] == "status" and body.get("execution_state") == "restarting":
                out["restarting"] = True
            elif parent.get("msg_id") != msg_id:
                continue
            elif head["msg_type"] == "stream":
                out[body["name"]] += body["text"]
            elif head["msg_type"] == "error":
                out["stderr"] += f"{body['ename']}: {body['evalue']}\n"
            elif head["msg_type"] == "status" and body.get("execution_state") == "idle":
                idle = True
            elif head["msg_type"] == "execute_reply":
                out["reply"] = body["status"]
            if out["reply"] is not None and idle:
                break
            if out["restarting"] and "memory limit" in out["stderr"]:
                break  # the kernel was stopped and said why: no reply will come
    finally:
        ws.close()
    return out
