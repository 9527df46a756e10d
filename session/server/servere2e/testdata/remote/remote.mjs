// Remote client for session/server/servere2e: drives a served acpd (`acpd
// serve --listen`) with the official ACP TypeScript SDK's experimental
// Streamable HTTP client (ACPD_REMOTE_TRANSPORT=http) or WebSocket client
// (=ws, with npm ws as the constructor Node 20 lacks), and prints one JSON
// summary line on stdout, which the Go test asserts. Everything else goes
// to stderr.
//
// It plays, on connection 1: initialize (advertising fs.readTextFile), two
// sessions, a prompt on each at the same time (the first runs tools: the
// editor's fs/read_text_file and a shell command behind a permission
// request, which it allows), a prompt it cancels while its command runs;
// then it closes the connection and, on connection 2 with the same token
// and the same cookie store, initializes, loads the first session and
// prompts it again.
//
// usage: node remote.mjs <workspace> <http base URL> <token file>
import { appendFileSync, readFileSync } from "node:fs";
import { format } from "node:util";
import * as acp from "@agentclientprotocol/sdk";
import { createHttpStream, MemoryAcpCookieStore } from "@agentclientprotocol/sdk/experimental/http-client";
import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";
import WebSocket from "ws";

const [workspace, baseURL, tokenFile] = process.argv.slice(2);
const transport = process.env.ACPD_REMOTE_TRANSPORT || "http";
const tag = transport; // prefixes every prompt, so the scripted model can tell the runs apart
const summary = { transport, http: [], ws: [], sessions: {}, steps: [], reads: [], permissions: [], replay: [], sdkErrors: [] };

function emit() {
  process.stdout.write(JSON.stringify(summary) + "\n");
}

// The SDK reports lines it cannot parse against its schemas with
// console.error instead of failing a call; the test insists there are none.
const consoleError = console.error;
console.error = (...args) => {
  summary.sdkErrors.push(format(...args));
  consoleError(...args);
};

const watchdog = setTimeout(() => {
  summary.fatal = "remote client timed out";
  emit();
  process.exit(2);
}, 100_000);

if (!workspace || !baseURL || !tokenFile) {
  summary.fatal = "usage: node remote.mjs <workspace> <http base URL> <token file>";
  emit();
  process.exit(2);
}
const token = readFileSync(tokenFile, "utf8").trim();
const headers = { Authorization: `Bearer ${token}` };
// One store for both connections: the SDK's reconnect recipe, so an
// affinity cookie set on connection 1 routes connection 2 to the same
// replica.
const cookieStore = new MemoryAcpCookieStore();

// ACPD_INTEROP_WIRE names the file that receives connection 1's messages,
// in order ({"dir":"client"|"agent","line":…}); connection 2's go to the
// same name with ".2" appended. The Go test checks each against the ACP
// schema and the protocol's ordering rules.
const wireBase = process.env.ACPD_INTEROP_WIRE;
function tapStream(stream, conn) {
  if (!wireBase) {
    return stream;
  }
  const file = conn === 1 ? wireBase : `${wireBase}.${conn}`;
  const rec = (dir, msg) => appendFileSync(file, JSON.stringify({ dir, line: JSON.stringify(msg) }) + "\n");
  const readable = stream.readable.pipeThrough(
    new TransformStream({
      transform(msg, controller) {
        rec("agent", msg);
        controller.enqueue(msg);
      },
    }),
  );
  const writer = stream.writable.getWriter();
  const writable = new WritableStream({
    write(msg) {
      rec("client", msg);
      return writer.write(msg);
    },
    close: () => writer.close(),
    abort: (reason) => writer.abort(reason),
  });
  return { readable, writable };
}

// Every HTTP exchange of the http client, as the server answered it.
function recordingFetch(conn) {
  return async (url, init = {}) => {
    const sent = new Headers(init.headers);
    const res = await fetch(url, init);
    summary.http.push({
      conn,
      method: init.method ?? "GET",
      status: res.status,
      accept: sent.get("accept"),
      sentConnectionId: sent.has("acp-connection-id"),
      sentSessionId: sent.get("acp-session-id"),
      sentCookie: sent.get("cookie"),
      sentAuthorization: sent.has("authorization"),
      connectionId: res.headers.get("acp-connection-id"),
      contentType: res.headers.get("content-type"),
      setCookie: res.headers.get("set-cookie"),
      accelBuffering: res.headers.get("x-accel-buffering"),
    });
    return res;
  };
}

// A ws constructor that records the upgrade answer.
function recordingWebSocket(conn) {
  return class extends WebSocket {
    constructor(url, protocols, options) {
      super(url, protocols, options);
      this.on("upgrade", (res) => {
        summary.ws.push({
          conn,
          status: res.statusCode,
          connectionId: res.headers["acp-connection-id"] ?? null,
          setCookie: res.headers["set-cookie"] ?? null,
          sentCookie: options?.headers?.Cookie ?? options?.headers?.cookie ?? null,
          sentAuthorization: Boolean(options?.headers?.Authorization),
        });
      });
    }
  };
}

function openStream(conn) {
  if (transport === "ws") {
    const url = baseURL.replace(/^http/, "ws");
    return tapStream(createWebSocketStream(url, { headers, cookieStore, WebSocket: recordingWebSocket(conn) }), conn);
  }
  return tapStream(createHttpStream(baseURL, { headers, cookieStore, fetch: recordingFetch(conn) }), conn);
}

// Per session: what its updates carried.
const observed = new Map();
function obs(sessionId) {
  if (!observed.has(sessionId)) {
    observed.set(sessionId, { toolCalls: 0, statuses: {}, text: "", kinds: {} });
  }
  return observed.get(sessionId);
}
// hooks fire on updates of the session being watched.
const hooks = new Map();
let replaying = null; // the session id whose session/load is running

function allowOnce(params) {
  const opt = params.options.find((o) => o.kind === "allow_once");
  if (!opt) {
    throw new Error(`no allow_once option among ${JSON.stringify(params.options)}`);
  }
  return { outcome: { outcome: "selected", optionId: opt.optionId } };
}

const app = acp
  .client({ name: "acpd-remote" })
  .onRequest("session/request_permission", async ({ params }) => {
    summary.permissions.push({
      sessionId: params.sessionId,
      toolCallId: params.toolCall.toolCallId,
      title: params.toolCall.title ?? null,
      optionKinds: params.options.map((o) => o.kind),
    });
    return allowOnce(params);
  })
  .onRequest("fs/read_text_file", async ({ params }) => {
    // The editor's unsaved buffer, which differs from the file on disk.
    summary.reads.push({ sessionId: params.sessionId, path: params.path });
    return { content: `CLIENT-BUFFER ${tag}\n` };
  })
  .onNotification("session/update", ({ params }) => {
    const u = params.update;
    if (replaying === params.sessionId) {
      const rec = { kind: u.sessionUpdate };
      if (u.content?.type === "text") {
        rec.text = u.content.text;
      }
      summary.replay.push(rec);
      return;
    }
    const o = obs(params.sessionId);
    o.kinds[u.sessionUpdate] = (o.kinds[u.sessionUpdate] ?? 0) + 1;
    if (u.sessionUpdate === "agent_message_chunk" && u.content.type === "text") {
      o.text += u.content.text;
    } else if (u.sessionUpdate === "tool_call") {
      o.toolCalls++;
      o.statuses[u.toolCallId] = u.status ?? "pending";
    } else if (u.sessionUpdate === "tool_call_update" && u.status) {
      o.statuses[u.toolCallId] = u.status;
    }
    hooks.get(params.sessionId)?.(u);
  });

// prompt runs one turn and records its stop reason (or error) and what the
// session's updates carried during it.
async function prompt(agent, name, sessionId, text) {
  observed.delete(sessionId);
  const rec = { name, sessionId };
  try {
    const resp = await agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] });
    rec.stopReason = resp.stopReason;
  } catch (err) {
    rec.error = { code: err.code ?? null, message: err.message, data: err.data ?? null };
  }
  // Notifications read before the response may still be in their handler
  // chains; one macrotask lets them finish.
  await new Promise((resolve) => setImmediate(resolve));
  summary.steps.push({ ...rec, ...obs(sessionId) });
}

const clientCapabilities = { fs: { readTextFile: true, writeTextFile: false }, terminal: false };
const clientInfo = { name: "acpd-remote", version: "1.0.0" };

try {
  // Connection 1.
  await app.connectWith(openStream(1), async (agent) => {
    const init = await agent.request("initialize", { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities, clientInfo });
    summary.initialize = {
      protocolVersion: init.protocolVersion,
      agentInfo: init.agentInfo ?? null,
      loadSession: init.agentCapabilities?.loadSession ?? false,
    };
    const a = await agent.request("session/new", { cwd: workspace, mcpServers: [] });
    const b = await agent.request("session/new", { cwd: workspace, mcpServers: [] });
    summary.sessions = { a: a.sessionId, b: b.sessionId };

    // Both sessions' turns at once on the one connection.
    await Promise.all([
      prompt(agent, "tools", a.sessionId, `${tag}-A: read notes.txt and check the shell`),
      prompt(agent, "second-session", b.sessionId, `${tag}-B: just answer`),
    ]);

    // Cancelled while its command runs.
    let cancelled = false;
    hooks.set(a.sessionId, (u) => {
      if (!cancelled && u.sessionUpdate === "tool_call_update" && u.status === "in_progress") {
        cancelled = true;
        void agent.notify("session/cancel", { sessionId: a.sessionId });
      }
    });
    await prompt(agent, "cancel", a.sessionId, "now sleep for a while");
    hooks.delete(a.sessionId);
  });

  // Connection 2: a reconnect continues session A.
  await app.connectWith(openStream(2), async (agent) => {
    const init = await agent.request("initialize", { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities, clientInfo });
    summary.reinitialize = { loadSession: init.agentCapabilities?.loadSession ?? false };
    const sessionId = summary.sessions.a;
    replaying = sessionId;
    // The old connection lets go of the session once its end is processed
    // (its turn cancelled, its transcript closed); until then a load is
    // refused as live elsewhere, and a client tries again.
    for (let attempt = 1; ; attempt++) {
      try {
        await agent.request("session/load", { sessionId, cwd: workspace, mcpServers: [] });
        break;
      } catch (err) {
        summary.loadRetries = attempt;
        if (attempt >= 50) {
          throw err;
        }
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
    await new Promise((resolve) => setImmediate(resolve));
    replaying = null;
    await prompt(agent, "after-reconnect", sessionId, "carry on");
  });
  // The http client ends a connection with a DELETE it does not wait
  // for; let the last one be answered before the summary is written.
  for (let i = 0; i < 200 && transport === "http" && !summary.http.some((h) => h.conn === 2 && h.method === "DELETE"); i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
} catch (err) {
  summary.fatal = String(err?.stack ?? err);
}

clearTimeout(watchdog);
emit();
process.exitCode = summary.fatal ? 1 : 0;
