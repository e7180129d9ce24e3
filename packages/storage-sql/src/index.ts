export * as Migrations from "./Migrations.js"
export * as SqlKeys from "./SqlKeys.js"
export * as SqlStorage from "./SqlStorage.js"
export * as SqlUsageLog from "./SqlUsageLog.js"
