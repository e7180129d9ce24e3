export * as MemoryKeys from "./MemoryKeys.js"
export * as MemoryUsageLog from "./MemoryUsageLog.js"
export * as StorageMemory from "./StorageMemory.js"
