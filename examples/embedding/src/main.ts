/**
 * Embedding the gateway in an existing Node server: the app keeps its own routes and mounts the
 * gateway under `/gateway`, so clients use `http://host:port/gateway/v1/messages`.
 *
 *   GATEWAY_CONFIG=./gateway.config.json node examples/embedding/dist/main.js
 */
import { Config, Gateway } from "@model-gateway/server"
import { readFileSync } from "node:fs"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"

/** Builds the host application: its own routes plus the gateway under a prefix. */
export const makeApp = async (config: Config.GatewayConfig, mountPath = "/gateway") => {
  const gateway = await Gateway.makeGateway(config, { mountPath })
  const listener = (req: IncomingMessage, res: ServerResponse) => {
    const url = req.url ?? "/"
    if (url === mountPath || url.startsWith(`${mountPath}/`)) return gateway.listener(req, res)
    if (url === "/hello") {
      res.writeHead(200, { "content-type": "application/json" })
      return res.end(JSON.stringify({ hello: "from the host application" }))
    }
    res.writeHead(404, { "content-type": "text/plain" })
    res.end("not found")
  }
  return { gateway, listener }
}

const isMain = import.meta.url === `file://${process.argv[1]}`
if (isMain) {
  const path = process.env.GATEWAY_CONFIG ?? "./gateway.config.json"
  const { config, warnings } = Config.parse(readFileSync(path, "utf8"), process.env)
  for (const w of warnings) console.warn(w)
  const { gateway, listener } = await makeApp(config)
  const server = createServer(listener).listen(Number(process.env.PORT ?? 3000), "127.0.0.1", () => {
    console.log(`host app on http://127.0.0.1:${process.env.PORT ?? 3000}; gateway at /gateway/v1/messages`)
  })
  process.on("SIGTERM", () => server.close(() => void gateway.dispose()))
}
