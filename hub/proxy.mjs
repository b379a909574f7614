// The course hub's proxy: configurable-http-proxy (hub/package-lock.json), listening on every address the hub's
// URL can reach, not the one --ip names (classroom/hub/addresses.py says why).
//
//   node hub/proxy.mjs <configurable-http-proxy's options>
//
// COURSE_PROXY_CLI: configurable-http-proxy's command (bin/configurable-http-proxy under the hub's proxy/).
// COURSE_PROXY_ALSO: {"<port>": ["::1", ...]}: when the proxy listens on <port>, it listens on these addresses too,
// each a server of its own that hands its connections to the proxy's (Node's documented 'connection' event), so the
// same routes, websockets and errors answer on every one. An address that cannot be had stops the proxy (exit 3):
// one that another process holds is one a browser could be sent to instead of the hub. An address this machine does
// not have (no IPv6) is skipped with a line, since nobody else can have it either.
import net from "node:net";
import { pathToFileURL } from "node:url";

const also = JSON.parse(process.env.COURSE_PROXY_ALSO || "{}");
const listen = net.Server.prototype.listen;

function twin(server, port, address) {
  const other = net.createServer((socket) => server.emit("connection", socket));
  other.on("error", (err) => {
    if (err.code === "EADDRNOTAVAIL" || err.code === "EAFNOSUPPORT") {
      console.error(`course proxy: no ${address} on this machine (${err.code}): not listening there`);
      return;
    }
    console.error(`course proxy: cannot listen on [${address}]:${port} (${err.code}): another process holds it; ` +
                  "stopping, so that no browser is sent there instead of the hub");
    process.exit(3);
  });
  listen.call(other, port, address);
  return other;
}

net.Server.prototype.listen = function (...args) {
  const port = args[0];
  const extra = (typeof port === "number" || typeof port === "string") ? also[String(port)] : undefined;
  if (extra && !this.courseTwins) {
    this.courseTwins = extra.map((address) => twin(this, Number(port), address));
    const close = this.close;
    this.close = function (...closing) {
      this.courseTwins.forEach((t) => t.close());
      return close.apply(this, closing);
    };
  }
  return listen.apply(this, args);
};

await import(pathToFileURL(process.env.COURSE_PROXY_CLI).href);
