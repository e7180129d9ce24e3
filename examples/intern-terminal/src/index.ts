export * as TerminalClient from "./TerminalClient.js"
