export * as Config from "./Config.js"
export * as Defaults from "./Defaults.js"
export * as Gateway from "./Gateway.js"
