// The set-up every interop client shares: a summary printed as one JSON
// line on stdout (which the Go test asserts; everything else goes to
// stderr), the SDK's complaints collected into it, a watchdog, the built
// acpd spawned over its real stdio with the wire optionally recorded, and
// the connection driven from initialize to the end of acpd's stdin.
import { spawn } from "node:child_process";
import { appendFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import { format } from "node:util";

// start begins a client whose summary (with an sdkErrors array) is printed
// by emit and by finish. The SDK reports notifications it cannot parse
// against its generated schemas (and unknown responses) with console.error
// instead of failing the call: they are collected so a test can insist
// there are none. After timeoutMs the summary is printed with fatal set to
// "<what> timed out" and the process exits 2.
export function start(summary, what, timeoutMs) {
  const emit = () => process.stdout.write(JSON.stringify(summary) + "\n");
  const consoleError = console.error;
  console.error = (...args) => {
    summary.sdkErrors.push(format(...args));
    consoleError(...args);
  };
  const watchdog = setTimeout(() => {
    summary.fatal = `${what} timed out`;
    emit();
    process.exit(2);
  }, timeoutMs);
  return {
    emit,
    // finish prints the summary; the exit status says whether it is fatal.
    finish() {
      clearTimeout(watchdog);
      emit();
      process.exitCode = summary.fatal ? 1 : 0;
    },
  };
}

// tap appends each complete line of one direction of the wire to the file
// wire as {"dir":"client"|"agent","line":…}, so the Go test can check each
// against the ACP schema and the protocol's ordering rules.
function tap(wire, dir) {
  let buf = "";
  return (chunk) => {
    buf += Buffer.from(chunk).toString("utf8");
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      if (line.trim() !== "") {
        appendFileSync(wire, JSON.stringify({ dir, line }) + "\n");
      }
    }
  };
}

// spawnAcpd starts bin with args, its stderr passed through; wire, when
// set (by default ACPD_INTEROP_WIRE), records every line both ways.
// exited resolves with how it ended.
export function spawnAcpd(bin, args, wire = process.env.ACPD_INTEROP_WIRE) {
  const child = spawn(bin, args, { stdio: ["pipe", "pipe", "inherit"] });
  if (wire) {
    const toAgent = tap(wire, "client");
    const write = child.stdin.write.bind(child.stdin);
    child.stdin.write = (chunk, ...rest) => {
      toAgent(chunk);
      return write(chunk, ...rest);
    };
    child.stdout.on("data", tap(wire, "agent"));
  }
  const exited = new Promise((resolve) => {
    child.on("exit", (code, signal) => resolve({ code, signal }));
    child.on("error", (err) => resolve({ code: null, signal: null, error: String(err) }));
  });
  return { child, exited };
}

// drive connects app (an SDK client built with the module acp) to the
// spawned acpd, sends initialize as client name with no fs or terminal
// capabilities plus capabilities, and runs body(agent, init). A failure
// anywhere is summary.fatal. It then ends acpd's stdin and resolves with
// how acpd exited.
export async function drive(acp, app, acpd, summary, { name, capabilities = {} }, body) {
  try {
    const stream = acp.ndJsonStream(Writable.toWeb(acpd.child.stdin), Readable.toWeb(acpd.child.stdout));
    await app.connectWith(stream, async (agent) => {
      const init = await agent.request("initialize", {
        protocolVersion: acp.PROTOCOL_VERSION,
        clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false, ...capabilities },
        clientInfo: { name, version: "1.0.0" },
      });
      await body(agent, init);
    });
  } catch (err) {
    summary.fatal = String(err?.stack ?? err);
  }
  acpd.child.stdin.end();
  return acpd.exited;
}
