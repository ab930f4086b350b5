import { createServer } from "node:http";
import type { AddressInfo, Socket } from "node:net";

/**
 * A proxy that forwards nothing: an agent CLI started with its address in HTTP(S)_PROXY (loopback
 * excepted by NO_PROXY) shows here every request it would have sent off the machine: telemetry,
 * update checks, package installs. Each is refused and recorded.
 */
export async function startEgressTrap() {
  const attempts: string[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    attempts.push(`${req.method} ${req.url}`);
    res.writeHead(403).end();
  });
  server.on("connect", (req, socket: Socket) => {
    socket.on("error", () => {});
    attempts.push(`CONNECT ${req.url}`);
    socket.end("HTTP/1.1 403 Forbidden\r\n\r\n");
  });
  server.on("connection", (s) => {
    s.on("error", () => {});
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    attempts,
    /** The variables that send an agent's outside traffic here. */
    env: {
      HTTPS_PROXY: url,
      HTTP_PROXY: url,
      https_proxy: url,
      http_proxy: url,
      NO_PROXY: "127.0.0.1,localhost",
      no_proxy: "127.0.0.1,localhost",
    },
    stop: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
