#!/usr/bin/env node
/**
 * The example gateway server: `npm start`. Reads GATEWAY_CONFIG (default ./gateway.config.json when
 * present), else builds a configuration from ANTHROPIC_API_KEY / OPENAI_API_KEY / OPENROUTER_API_KEY.
 * PORT, HOST and DATABASE_URL override the file. SIGTERM / SIGINT shut down gracefully.
 */
import { randomBytes } from "node:crypto"
import { existsSync, readFileSync } from "node:fs"
import { ConfigError, type GatewayConfig, parse } from "./Config.js"
import { fromEnvironment } from "./Defaults.js"
import { startServer } from "./Gateway.js"

const env = process.env

const load = (): GatewayConfig => {
  const path = env.GATEWAY_CONFIG ?? (existsSync("./gateway.config.json") ? "./gateway.config.json" : undefined)
  if (path === undefined) {
    console.log("model-gateway: no configuration file; using providers from the environment")
    return fromEnvironment(env)
  }
  let text: string
  try {
    text = readFileSync(path, "utf8")
  } catch (e) {
    throw new ConfigError(`cannot read configuration file ${path}: ${(e as Error).message}`)
  }
  const { config, warnings } = parse(text, env)
  for (const w of warnings) console.warn(`model-gateway: warning: ${w}`)
  console.log(`model-gateway: configuration from ${path}`)
  return config
}

const withOverrides = (config: GatewayConfig): GatewayConfig => {
  let port = config.server.port
  if (env.PORT !== undefined) {
    port = Number(env.PORT)
    if (!Number.isInteger(port) || port < 0 || port > 65535) {
      throw new ConfigError(`PORT: not a port number: ${env.PORT}`)
    }
  }
  const keys = [...config.keys]
  if (env.GATEWAY_API_KEY && !keys.some((k) => k.key === env.GATEWAY_API_KEY)) {
    keys.push({
      key: env.GATEWAY_API_KEY,
      workspace: "default",
      management: true,
      interns: true,
      label: "GATEWAY_API_KEY"
    })
  }
  return {
    ...config,
    server: { ...config.server, port, host: env.HOST ?? config.server.host },
    storage: env.DATABASE_URL ?? config.storage,
    keys
  }
}

const main = async () => {
  let config = withOverrides(load())
  let generated: string | undefined
  if (config.keys.length === 0) {
    generated = `mg-${randomBytes(24).toString("base64url")}`
    config = {
      ...config,
      keys: [{ key: generated, workspace: "default", management: true, interns: true, label: "generated" }]
    }
  }
  const running = await startServer(config)
  const models = Object.keys(config.models)
  console.log(
    `model-gateway: listening on ${running.url}${config.server.basePath} (storage ${
      config.storage.replace(/\/\/[^@/]*@/, "//***@")
    })`
  )
  console.log(`model-gateway: ${models.length} model(s): ${models.join(", ") || "none (configure providers)"}`)
  if (generated !== undefined) {
    console.log(
      `model-gateway: no API key configured; generated a management key for this run (shown once):\n  ${generated}`
    )
  }
  let stopping = false
  const stop = (signal: string) => {
    if (stopping) return
    stopping = true
    console.log(`model-gateway: ${signal}: finishing in-flight requests`)
    running.close().then(
      () => process.exit(0),
      (e) => {
        console.error("model-gateway: shutdown failed", e)
        process.exit(1)
      }
    )
  }
  process.on("SIGTERM", () => stop("SIGTERM"))
  process.on("SIGINT", () => stop("SIGINT"))
}

main().catch((e) => {
  console.error(`model-gateway: ${e instanceof ConfigError ? e.message : e instanceof Error ? e.stack : String(e)}`)
  process.exit(1)
})
