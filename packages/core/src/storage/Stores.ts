/**
 * The stores a gateway needs, as one type: what a storage adapter package provides in one layer (memory, SQLite,
 * PostgreSQL), and what a composition root asks of it.
 */
import type { Keys } from "../auth/Keys.js"
import type { BatchStore } from "../batches/BatchStore.js"
import type { EndpointStats } from "../health/EndpointStats.js"
import type { InternStore } from "../interns/InternStore.js"
import type { QuotaStore } from "../limits/QuotaStore.js"
import type { SessionAffinity } from "../sessions/SessionAffinity.js"
import type { UsageLog } from "../usage/UsageLog.js"

/** Every store port. */
export type Stores = Keys | UsageLog | EndpointStats | SessionAffinity | InternStore | BatchStore | QuotaStore
